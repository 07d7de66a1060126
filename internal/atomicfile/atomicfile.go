// Package atomicfile writes a file whole or not at all, for readers that may look at
// any time. It imports nothing of staticpod's: any package may use it.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes path through a temporary file in the same directory and a
// rename, so that a reader sees the old content or the new, never a part.
func WriteFile(path string, content []byte, mode fs.FileMode) error {
	return write(path, content, mode, false)
}

// WriteFileDurably is WriteFile for a record that must outlive a crash of the machine
// (a checkpoint): the file is synced before the rename and its directory after.
func WriteFileDurably(path string, content []byte, mode fs.FileMode) error {
	if err := write(path, content, mode, true); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func write(path string, content []byte, mode fs.FileMode, sync bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(content)
	if err == nil && sync {
		err = f.Sync()
	}
	err = errors.Join(err, f.Chmod(mode), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
