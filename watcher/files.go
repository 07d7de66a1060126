package watcher

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/staticpod/staticpod/manifests"
)

// ignoredSuffixes are the endings of editor and package-manager leftovers that live
// beside real manifests: backups, swap files, patch rejects, unmerged package configs.
var ignoredSuffixes = []string{
	"~", ".swp", ".swx", ".swo", ".bak", ".orig", ".rej", ".tmp", ".rpmnew", ".rpmsave",
}

// Ignored reports whether a file in a manifest directory is not a manifest: dot files,
// editor swap and backup files, patch leftovers, dpkg and rpm leftovers and vim's
// write-test file "4913". Only the base name is looked at.
func Ignored(name string) bool {
	base := filepath.Base(name)
	switch {
	case base == "" || strings.HasPrefix(base, "."):
		return true
	case base == "4913": // vim probes whether it may write a directory with this file
		return true
	case strings.HasPrefix(base, "#") && strings.HasSuffix(base, "#"): // emacs autosave
		return true
	case strings.Contains(base, ".dpkg-"): // .dpkg-old, .dpkg-new, .dpkg-dist, .dpkg-tmp
		return true
	}
	for _, s := range ignoredSuffixes {
		if strings.HasSuffix(base, s) {
			return true
		}
	}
	return false
}

// ListFiles returns the manifest files of path in sorted order: path itself when it is a
// file, or else the files directly inside it that are not Ignored. Directories inside
// are not entered, as on the kubelet, and dangling symlinks are left out. Files that
// are not regular (named pipes, devices, sockets) are listed, for ReadFile to refuse:
// the operator learns that they are not manifests. A path that does not exist has no
// files and is no error: a missing manifest directory is an empty source.
func ListFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stat manifest path: %w", err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		if Ignored(e.Name()) {
			continue
		}
		full := filepath.Join(path, e.Name())
		info, err := os.Stat(full) // follow symlinks, as the kubelet does
		if err != nil || info.IsDir() {
			continue // subdirectories, dangling links: not manifests
		}
		files = append(files, full)
	}
	sort.Strings(files)
	return files, nil
}

// ErrTooLarge is returned for a manifest file over manifests.MaxManifestBytes.
var ErrTooLarge = fmt.Errorf("manifest file is larger than %d bytes", manifests.MaxManifestBytes)

// ErrNotRegular is returned for a manifest path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ReadFile reads one manifest file, refusing to read more than
// manifests.MaxManifestBytes of it, and anything but a regular file. It never blocks
// on what is not one: the file is opened without waiting (a named pipe with no writer
// would hold the whole source up for ever) and checked once open, so that one swapped
// in after the directory was listed is refused too.
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if info, serr := os.Stat(path); serr == nil && !info.Mode().IsRegular() {
			return nil, notRegular(path, info) // a socket cannot even be opened
		}
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPath(err))
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(path, info)
	}
	data, err := io.ReadAll(io.LimitReader(f, manifests.MaxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPath(err))
	}
	if len(data) > manifests.MaxManifestBytes {
		return nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	return data, nil
}

func notRegular(path string, info fs.FileInfo) error {
	return fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fileKind(info.Mode()))
}

// unwrapPath is err without the path an *fs.PathError repeats (the file's, or, through
// a symlink, its target's), for the caller to name the manifest's path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fileKind names the type of a file that is not regular.
func fileKind(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode.IsDir():
		return "a directory"
	}
	return "type " + mode.Type().String()
}
