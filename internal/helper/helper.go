// Package helper carries the staticpod-helper program (./cmd/staticpod-helper) inside
// the staticpod binary and installs it, so that what runs once per container, the log
// writer, and once per pod sandbox, the pause process, is a 2 MB program and not the
// 40 MB daemon: each running copy costs less than a fifth of the memory.
//
// The build writes the program to bin/staticpod-helper-<GOARCH> before it builds
// staticpod (make build, hack/build.sh); a binary built by a plain `go build` carries
// none, and Install then returns ErrNotEmbedded.
//
// It imports nothing of staticpod's.
package helper

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
)

// Name is the installed program's file name.
const Name = "staticpod-helper"

// ErrNotEmbedded is Install's error when this binary was built without the helper
// program for its architecture.
var ErrNotEmbedded = errors.New("staticpod was built without " + Name + " (build it with make build)")

// embedded holds what the build put in bin: the program, and a README that is always
// there so that the pattern matches in a fresh clone.
//
//go:embed bin
var embedded embed.FS

// Install writes the helper program for this binary's architecture into dir (made if
// missing) as Name, executable, and returns its absolute path. A file there with the same
// content is kept; another is replaced by rename, so that the log writers and sandboxes
// running it keep their old program, as they do after an upgrade of staticpod.
func Install(dir string) (string, error) {
	return install(embedded, runtime.GOARCH, dir)
}

// InstallUnder installs the helper into the bin directory of root, staticpod's root
// dir, and returns the path to run as containerdrt.Config.Self. A binary built without
// the helper returns "" (run staticpod itself, as versions before the helper did) and
// says so in one warning: its log writers and sandboxes cost more memory.
func InstallUnder(root string, log *slog.Logger) (string, error) {
	path, err := Install(filepath.Join(root, "bin"))
	if errors.Is(err, ErrNotEmbedded) {
		log.Warn("staticpod was built without its helper program (use make build): " +
			"every container's log writer and every pod sandbox runs the whole staticpod binary, and takes several times the memory")
		return "", nil
	}
	return path, err
}

// install is Install from fsys (a tree holding bin/) for architecture arch.
func install(fsys fs.FS, arch, dir string) (string, error) {
	program, err := fs.ReadFile(fsys, "bin/"+Name+"-"+arch)
	if errors.Is(err, fs.ErrNotExist) {
		return "", ErrNotEmbedded
	}
	if err != nil {
		return "", fmt.Errorf("install %s: %w", Name, err)
	}
	// The shim runs it from a directory of its own.
	if dir, err = filepath.Abs(dir); err != nil {
		return "", fmt.Errorf("install %s: %w", Name, err)
	}
	path := filepath.Join(dir, Name)
	if installed(path, program) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install %s: %w", Name, err)
	}
	if err := writeAtomically(path, program); err != nil {
		return "", fmt.Errorf("install %s: %w", Name, err)
	}
	return path, nil
}

// installed reports whether path is an executable file holding program.
func installed(path string, program []byte) bool {
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 || info.Size() != int64(len(program)) {
		return false
	}
	have, err := os.ReadFile(path)
	return err == nil && bytes.Equal(have, program)
}

// writeAtomically writes data to a new file beside path and renames it over path, so
// that path is always either the old program or the whole new one. It does not sync:
// a file left short by a crash differs from the program, and the next Install writes
// it again.
func writeAtomically(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+Name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails once renamed
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
