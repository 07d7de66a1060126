// Package dirlock gives one process the use of directories: an exclusive flock(2) on a
// lock file in each, holding the holder's PID, taken without waiting. A second staticpod
// on the same root dir or pod log dir finds the lock held and stops before it touches
// anything: its first relist would otherwise remove, as the data of pods that are gone,
// every pod directory and log directory of the first one's pods.
//
// The lock is the kernel's: it goes with the process, however it ends (kill -9 too), and
// it is not inherited across exec (the file is opened close-on-exec), so neither a
// container nor a containerd started by the holder keeps it. The file stays when the
// lock is released; its PID means something only while it is locked.
//
// It imports nothing of staticpod's.
package dirlock

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// FileName is the lock file's name in each locked directory.
const FileName = "staticpod.lock"

// HeldError is a directory whose lock another process holds.
type HeldError struct {
	Dir  string
	File string // the lock file
	PID  int    // the holder, as it wrote itself into File; 0 when not yet written
}

func (e *HeldError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("%s is in use: %s holds the lock %s (is another staticpod running on it?)", e.Dir, holder, e.File)
}

// Lock is the locks of a set of directories, held until Release or the process's end.
type Lock struct {
	files []*os.File
}

// Acquire locks dirs, in order, making each that is missing (mode 0755). A directory
// given twice, or under two names, is locked once. When a lock is held elsewhere, what
// was taken is released and the error is a *HeldError naming the holder's PID.
func Acquire(dirs ...string) (*Lock, error) {
	l := &Lock{}
	for _, dir := range dirs {
		if err := l.add(dir); err != nil {
			l.Release()
			return nil, err
		}
	}
	return l, nil
}

// add locks dir, unless l holds its lock file already.
func (l *Lock) add(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	// The lock is held on a read-only descriptor: one open for writing would keep the
	// file system from being remounted read-only (EBUSY) for as long as staticpod runs.
	// os.OpenFile opens close-on-exec: no child ever holds the lock.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
	if errors.Is(err, unix.EROFS) {
		// A read-only directory with no lock file yet: nothing can be removed from
		// it, by this process or another, so there is nothing to guard.
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	for _, held := range l.files {
		if other, err := held.Stat(); err == nil && os.SameFile(info, other) {
			f.Close() // a second flock of the same file would find it taken, by us
			return nil
		}
	}
	if err := flock(f); errors.Is(err, unix.EWOULDBLOCK) {
		pid := readPID(f)
		f.Close()
		return &HeldError{Dir: dir, File: path, PID: pid}
	} else if err != nil {
		f.Close()
		return fmt.Errorf("lock %s: %w", path, err)
	}
	if err := writePID(path); err != nil && !errors.Is(err, unix.EROFS) { // read-only: the holder goes unnamed
		f.Close()
		return fmt.Errorf("lock %s: %w", path, err)
	}
	l.files = append(l.files, f)
	return nil
}

// Release unlocks every directory. The files stay.
func (l *Lock) Release() error {
	var errs []error
	for _, f := range l.files {
		errs = append(errs, f.Close()) // closing the only descriptor drops the flock
	}
	l.files = nil
	return errors.Join(errs...)
}

// flock takes f's exclusive lock without waiting, retrying a call a signal interrupted.
func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// writePID replaces the lock file's content with this process's PID, through a
// descriptor of its own: closing it leaves the lock, which belongs to the descriptor
// that took it (flock locks go with the open file description).
func writePID(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(strconv.Itoa(os.Getpid()) + "\n"))
	return errors.Join(err, f.Close())
}

// readPID reads the PID the holder of f's lock wrote into it; 0 when there is none yet.
func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	if err != nil {
		return 0
	}
	return pid
}
