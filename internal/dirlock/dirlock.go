// Package dirlock gives one process the use of directories: an exclusive flock(2) on a
// lock file in each, taken without waiting. A second staticpod on the same root dir or
// pod log dir finds the lock held and stops before it touches anything: its first repair
// would otherwise remove, as the data of pods that are gone, every pod directory and log
// directory of the first one's pods.
//
// The lock file is a dot file (FileName), so that log shippers reading the pod log dir's
// pods' directories pass it by; it is the locking user's alone (mode 0600), for flock
// needs only a descriptor open for reading: a lock file another user can read, or the
// directory itself, would let any local user take the lock and keep staticpod from
// starting. The lock is held on a read-only descriptor and the holder's PID written
// through another, so that the file system can still be remounted read-only while the
// lock is held (a descriptor open for writing makes that fail); the holder is found in
// /proc/locks, which names it even when the file could not be written.
//
// The lock is the kernel's: it goes with the process, however it ends (kill -9 too), and
// it is not inherited across exec (the file is opened close-on-exec), so neither a
// container nor a containerd started by the holder keeps it. The file stays when the
// lock is released.
//
// It imports nothing of staticpod's.
package dirlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	// FileName is the lock file's name in each locked directory.
	FileName = ".staticpod.lock"
	// procLocks lists the kernel's file locks and their holders.
	procLocks = "/proc/locks"
)

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
	return fmt.Sprintf("%s is in use: %s holds its lock %s (is another staticpod running on it?)", e.Dir, holder, filepath.Join(e.Dir, FileName))
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

// add locks dir, unless l holds its lock already.
func (l *Lock) add(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	f, err := open(path)
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
		f.Close()
		return &HeldError{Dir: dir, PID: holder(procLocks, info)}
	} else if err != nil {
		f.Close()
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := writePID(path); err != nil && !errors.Is(err, unix.EROFS) { // read-only: /proc/locks still names the holder
		f.Close()
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	l.files = append(l.files, f)
	return nil
}

// open opens the lock file at path for reading, close-on-exec (no child ever holds the
// lock), making it when it is missing. It must be a regular file of this process's
// user that no one else may read: one that is not is refused rather than locked, for
// whoever can read it can take the lock.
func open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file of user %d that only it may read (mode %#o, user %d): remove it", path, os.Geteuid(), st.Mode&0o7777, st.Uid)
	}
	return f, nil
}

// writePID replaces the lock file's content with this process's PID, for the operator,
// through a descriptor of its own: closing it leaves the lock, which belongs to the
// descriptor that took it (flock locks go with the open file description).
func writePID(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(strconv.Itoa(os.Getpid()) + "\n"))
	return errors.Join(err, f.Close())
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
