package logs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// rotate moves the current file aside as <path>.<time> and continues in a new, empty file
// at path. It is called with mu held, so no record is written meanwhile.
//
// The oldest rotated files are deleted first, down to MaxFiles-2 as the kubelet does, so
// that even during a rotation no more than MaxFiles files exist. The path never stops
// naming a log file, so a reader that follows it by name sees the new file appear in
// place of the old one: the new file is created under a hidden name, the old one is
// hard-linked to its rotated name, and the new one renamed over path.
//
// Rotated names have the kubelet's one-second resolution, so the file is rotated at most
// once a second: until the clock reaches the next second it keeps growing beyond MaxSize
// (the kubelet itself only checks every 10 s). Failures leave the current file in place
// and are retried in the next second.
func (w *Writer) rotate(now time.Time) error {
	rotated := w.cfg.Path + "." + now.Format(rotatedTimeFormat)
	if rotated == w.lastRotation {
		return nil // tried already this second
	}
	w.lastRotation = rotated
	if _, err := os.Lstat(rotated); err == nil {
		return nil // rotated by an earlier writer of this path in this second
	}
	// A file that cannot be deleted must not stop the rotation: the current file would
	// then grow without bound.
	removeErr := w.removeOldest(w.cfg.MaxFiles - 2)
	next, err := w.createNext()
	if err != nil {
		return errors.Join(removeErr, fmt.Errorf("rotate log %s: %w", w.cfg.Path, err))
	}
	if err := os.Link(w.cfg.Path, rotated); err != nil {
		discard(next)
		return errors.Join(removeErr, fmt.Errorf("rotate log %s: %w", w.cfg.Path, err))
	}
	if err := os.Rename(next.Name(), w.cfg.Path); err != nil {
		discard(next)
		os.Remove(rotated)
		return errors.Join(removeErr, fmt.Errorf("rotate log %s: %w", w.cfg.Path, err))
	}
	old := w.f
	w.f, w.size = next, 0
	return errors.Join(removeErr, closeLog(old))
}

// createNext creates the file that replaces the current one, under a name that Rotated
// does not list.
func (w *Writer) createNext() (*os.File, error) {
	dir, base := filepath.Split(w.cfg.Path)
	f, err := os.OpenFile(filepath.Join(dir, "."+base+".next"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, fileMode)
	if err != nil {
		return nil, fmt.Errorf("create next log file: %w", err)
	}
	return f, nil
}

// removeOldest deletes the oldest rotated files until keep remain.
func (w *Writer) removeOldest(keep int) error {
	rotated, err := Rotated(w.cfg.Path)
	if err != nil {
		return err
	}
	var errs []error
	for len(rotated) > max(keep, 0) {
		if err := os.Remove(rotated[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove rotated log: %w", err))
		}
		rotated = rotated[1:]
	}
	return errors.Join(errs...)
}

func discard(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

func closeLog(f *os.File) error {
	if err := f.Close(); err != nil {
		return fmt.Errorf("close rotated log: %w", err)
	}
	return nil
}
