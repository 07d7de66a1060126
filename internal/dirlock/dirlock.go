// Package dirlock gives one process the use of directories: an exclusive flock(2) on
// each directory itself, taken without waiting. A second staticpod on the same root dir
// or pod log dir finds the lock held and stops before it touches anything: its first
// relist would otherwise remove, as the data of pods that are gone, every pod directory
// and log directory of the first one's pods.
//
// The directory itself is locked, not a file in it: the pod log dir holds only pods'
// directories, as log shippers expect of /var/log/pods, and nothing is written, so a
// read-only file system can be locked and can still be remounted read-only while the
// lock is held (a descriptor open for writing would make that fail). The holder's PID
// is found in /proc/locks.
//
// The lock is the kernel's: it goes with the process, however it ends (kill -9 too), and
// it is not inherited across exec (the directory is opened close-on-exec), so neither a
// container nor a containerd started by the holder keeps it.
//
// It imports nothing of staticpod's.
package dirlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// procLocks lists the kernel's file locks and their holders.
const procLocks = "/proc/locks"

// HeldError is a directory whose lock another process holds.
type HeldError struct {
	Dir string
	PID int // the holder, from /proc/locks; 0 when it cannot be told
}

func (e *HeldError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("%s is in use: %s holds its lock (is another staticpod running on it?)", e.Dir, holder)
}

// Lock is the locks of a set of directories, held until Release or the process's end.
type Lock struct {
	dirs []*os.File
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

// add locks dir, unless l holds its lock already.
func (l *Lock) add(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	// os.Open opens read-only and close-on-exec: no child ever holds the lock.
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	for _, held := range l.dirs {
		if other, err := held.Stat(); err == nil && os.SameFile(info, other) {
			f.Close() // a second flock of the same directory would find it taken, by us
			return nil
		}
	}
	if err := flock(f); errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return &HeldError{Dir: dir, PID: holder(procLocks, info)}
	} else if err != nil {
		f.Close()
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	l.dirs = append(l.dirs, f)
	return nil
}

// Release unlocks every directory.
func (l *Lock) Release() error {
	var errs []error
	for _, f := range l.dirs {
		errs = append(errs, f.Close()) // closing the only descriptor drops the flock
	}
	l.dirs = nil
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

// holder returns the PID of the process holding a flock on the file of info, as the
// kernel lists it in the file at path (/proc/locks), or 0. Its lines read
// "1: FLOCK  ADVISORY  WRITE 4675 fd:01:1183041 0 EOF": the device's major and minor
// numbers in hex, the inode in decimal.
func holder(path string, info os.FileInfo) int {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != want {
			continue // also the "->" lines of waiters, which have another layout
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil {
			return pid
		}
	}
	return 0
}
