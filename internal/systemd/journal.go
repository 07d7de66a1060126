package systemd

import (
	"fmt"
	"log/slog"
	"os"
	"syscall"
)

// ToJournal reports whether f is the journal's stream that systemd names in
// JOURNAL_STREAM ("<device>:<inode>"): a child whose stderr was redirected
// elsewhere inherits the variable, but not the stream.
func ToJournal(f *os.File, stream string) bool {
	var dev, ino uint64
	if _, err := fmt.Sscanf(stream, "%d:%d", &dev, &ino); err != nil {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return uint64(st.Dev) == dev && st.Ino == ino
}

// DropTime removes the time of a record, for a handler whose lines go to the journal,
// which stamps them itself.
func DropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// NewLogger returns the daemon's structured logger on stderr, at level (debug, info,
// warn, error), in format (text, json). Under systemd, when stderr is the journal
// (JOURNAL_STREAM), text lines carry no time: the journal stamps each line itself.
func NewLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		if ToJournal(os.Stderr, os.Getenv("JOURNAL_STREAM")) {
			opts.ReplaceAttr = DropTime
		}
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}
