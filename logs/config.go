package logs

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
)

// Command is the staticpod subcommand that runs a Writer for containerd's binary:// log
// driver.
const Command = "logger"

// Keys of an encoded Config: the logger's settings, named like flags.
const (
	keyPath        = "path"
	keySymlink     = "symlink"
	keyMaxSize     = "max-size"
	keyMaxFiles    = "max-files"
	keyMaxLineSize = "max-line-size"
)

// Config is what one container's log writer needs. Zero sizes and counts mean the
// defaults.
type Config struct {
	Path        string // the current log file, <pods-dir>/.../<attempt>.log
	Symlink     string // the kubelet-style link to Path; empty for none
	MaxSize     int64  // rotate beyond this many bytes; 0 for DefaultMaxSize, negative never
	MaxFiles    int    // files kept, the current one included; 0 for DefaultMaxFiles, else at least 2
	MaxLineSize int    // content bytes per record; 0 for DefaultMaxLineSize
}

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	if c.MaxSize == 0 {
		c.MaxSize = DefaultMaxSize
	}
	if c.MaxFiles == 0 {
		c.MaxFiles = DefaultMaxFiles
	}
	if c.MaxLineSize == 0 {
		c.MaxLineSize = DefaultMaxLineSize
	}
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Path == "":
		return errors.New("no log path")
	case c.MaxFiles < 0 || c.MaxFiles == 1:
		return fmt.Errorf("max files %d: must be at least 2 (the current file and one rotated)", c.MaxFiles)
	case c.MaxLineSize < 0:
		return fmt.Errorf("max line size %d: must not be negative", c.MaxLineSize)
	}
	return nil
}

// Query returns the query of a binary:// log URI (cio.BinaryIO's args) that makes
// containerd's shim run `staticpod logger <encoded config>`.
//
// The shim builds the logger's argv from the query alone, as `key value` pairs in Go map
// order, which is random: a query of several keys would put them, and the subcommand
// name, anywhere. So the query has exactly one key, the subcommand, and its value is the
// whole Config URL-encoded (Encode); argv is then always [logger, <encoded>].
func (c Config) Query() map[string]string {
	return map[string]string{Command: c.Encode()}
}

// Encode returns c as a URL query (keys sorted, zero fields left out), the single
// argument of the logger subcommand.
func (c Config) Encode() string {
	v := url.Values{}
	set := func(key, value string, keep bool) {
		if keep {
			v.Set(key, value)
		}
	}
	set(keyPath, c.Path, true)
	set(keySymlink, c.Symlink, c.Symlink != "")
	set(keyMaxSize, strconv.FormatInt(c.MaxSize, 10), c.MaxSize != 0)
	set(keyMaxFiles, strconv.Itoa(c.MaxFiles), c.MaxFiles != 0)
	set(keyMaxLineSize, strconv.Itoa(c.MaxLineSize), c.MaxLineSize != 0)
	return v.Encode()
}

// ParseConfig decodes Encode's result. Unknown or repeated keys are errors, so that a
// logger started by a newer staticpod fails loudly rather than ignoring a setting.
func ParseConfig(encoded string) (Config, error) {
	v, err := url.ParseQuery(encoded)
	if err != nil {
		return Config{}, fmt.Errorf("parse logger config %q: %w", encoded, err)
	}
	var c Config
	for key, values := range v {
		if len(values) != 1 {
			return Config{}, fmt.Errorf("parse logger config: %s given %d times", key, len(values))
		}
		if err := c.set(key, values[0]); err != nil {
			return Config{}, fmt.Errorf("parse logger config: %s: %w", key, err)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("parse logger config: %w", err)
	}
	return c, nil
}

// set assigns one encoded key.
func (c *Config) set(key, value string) error {
	var err error
	switch key {
	case keyPath:
		c.Path = value
	case keySymlink:
		c.Symlink = value
	case keyMaxSize:
		c.MaxSize, err = strconv.ParseInt(value, 10, 64)
	case keyMaxFiles:
		c.MaxFiles, err = strconv.Atoi(value)
	case keyMaxLineSize:
		c.MaxLineSize, err = strconv.Atoi(value)
	default:
		return errors.New("unknown key")
	}
	return err
}
