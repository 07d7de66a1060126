package dirlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// holdEnv makes the test binary a process that locks the directory it names, says
// "locked" and holds the lock until its stdin closes.
const holdEnv = "DIRLOCK_TEST_HOLD"

// flockEnv makes the test binary a process that opens the file it names and flocks it,
// as any user's flock(1) would, and says what came of it.
const flockEnv = "DIRLOCK_TEST_FLOCK"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		if _, err := Acquire(dir); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("locked")
		bufio.NewReader(os.Stdin).ReadString('\n') // until stdin closes
		os.Exit(0)
	}
	if path := os.Getenv(flockEnv); path != "" {
		f, err := os.Open(path)
		if err == nil {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		}
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("locked")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holding is another process holding a directory's lock.
type holding struct {
	cmd  *exec.Cmd
	stop func() // closes its stdin: it exits
}

// mustHold starts a process that locks dir, and returns once it holds the lock.
func mustHold(t *testing.T, dir string) *holding {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holding{cmd: cmd, stop: func() { stdin.Close(); cmd.Wait() }}
	t.Cleanup(h.stop)
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("the holding process said %q, want locked", line)
	}
	return h
}

func mustAcquire(t *testing.T, dirs ...string) *Lock {
	t.Helper()
	l, err := Acquire(dirs...)
	if err != nil {
		t.Fatalf("Acquire(%v) = %v", dirs, err)
	}
	t.Cleanup(func() { l.Release() })
	return l
}

// TestHeldLockNamesItsHolder: a directory another process holds is refused with that
// process's PID and the lock file; once the holder is gone, the lock is free.
func TestHeldLockNamesItsHolder(t *testing.T) {
	root, logs := t.TempDir(), t.TempDir()
	h := mustHold(t, logs)
	_, err := Acquire(root, logs)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("Acquire of a held directory = %v, want a HeldError", err)
	}
	want := &HeldError{Dir: logs, PID: h.cmd.Process.Pid}
	if *held != *want {
		t.Errorf("Acquire of a held directory = %+v, want %+v", held, want)
	}
	for _, part := range []string{fmt.Sprint(want.PID), want.Dir} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not name %s", err, part)
		}
	}
	// The first directory, taken before the held one was found, was released.
	mustAcquire(t, root).Release()

	h.stop()
	mustAcquire(t, root, logs)
	if data, _ := os.ReadFile(filepath.Join(logs, FileName)); string(data) != fmt.Sprintf("%d\n", os.Getpid()) {
		t.Errorf("lock file holds %q, want this process's PID", data)
	}
}

// TestHolderKilledFreesTheLock: the lock goes with its process, however it ends.
func TestHolderKilledFreesTheLock(t *testing.T) {
	dir := t.TempDir()
	h := mustHold(t, dir)
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	h.cmd.Wait()
	mustAcquire(t, dir)
}

// TestLockIsNotInherited: a child started while the lock is held (a container's shim, a
// containerd) does not hold it: once released, the lock is free though the child runs.
func TestLockIsNotInherited(t *testing.T) {
	dir := t.TempDir()
	l := mustAcquire(t, dir)
	child := mustHold(t, t.TempDir()) // any child that keeps running
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", child.cmd.Process.Pid))
	for _, fd := range fds {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", child.cmd.Process.Pid, fd.Name())); target == filepath.Join(dir, FileName) {
			t.Errorf("the child has the lock file open as fd %s", fd.Name())
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, dir)
}

// TestSameDirectoryTwice: a root dir that is also the pod log dir, under its name or
// another, is locked once, not refused as held by this very process.
func TestSameDirectoryTwice(t *testing.T) {
	dir := t.TempDir()
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(dir, alias); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, dir, dir, alias)
	if len(l.files) != 1 {
		t.Errorf("Acquire of one directory under 3 names holds %d files, want 1", len(l.files))
	}
	if _, err := Acquire(alias); !errors.As(err, new(*HeldError)) {
		t.Errorf("Acquire(alias) while held = %v, want a HeldError", err)
	}
}

// TestMissingDirectoryIsMade: the lock comes before anything else makes the directory.
func TestMissingDirectoryIsMade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	mustAcquire(t, dir)
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Errorf("lock file: %v", err)
	}
}

// TestHolderFromProcLocks reads the holder of a flock from the kernel's list.
func TestHolderFromProcLocks(t *testing.T) {
	dir := t.TempDir()
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := info.Sys().(*syscall.Stat_t)
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	locks := filepath.Join(t.TempDir(), "locks")
	if err := os.WriteFile(locks, []byte(strings.Join([]string{
		"1: POSIX  ADVISORY  WRITE 11 " + id + " 0 EOF",
		"2: FLOCK  ADVISORY  WRITE 22 fd:01:1 0 EOF",
		"3: FLOCK  ADVISORY  WRITE 4675 " + id + " 0 EOF",
		"3: -> FLOCK  ADVISORY  WRITE 33 " + id + " 0 EOF",
	}, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := holder(locks, info); got != 4675 {
		t.Errorf("holder = %d, want 4675", got)
	}
	if got := holder(filepath.Join(t.TempDir(), "none"), info); got != 0 {
		t.Errorf("holder without a list = %d, want 0", got)
	}
}

// TestLockLetsTheFileSystemBeRemountedReadOnly: the lock writes nothing and holds no
// descriptor open for writing, so a root dir's file system can still be remounted
// read-only (an operator protecting it, or the disk failing), and a staticpod started
// on a read-only one takes its lock.
func TestLockLetsTheFileSystemBeRemountedReadOnly(t *testing.T) {
	needRoot(t, "mounts a tmpfs: needs root")
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	root, empty := filepath.Join(dir, "root"), filepath.Join(dir, "empty")
	l := mustAcquire(t, root)
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only with the lock held: %v", err)
	}
	var held *HeldError
	if _, err := Acquire(root); !errors.As(err, &held) || held.PID != os.Getpid() {
		t.Errorf("Acquire on the read-only file system while held = %v, want a HeldError naming %d", err, os.Getpid())
	}
	l.Release()
	mustAcquire(t, root, empty).Release()
	if _, err := os.Stat(filepath.Join(empty, FileName)); !os.IsNotExist(err) {
		t.Errorf("a lock file appeared on a read-only file system (%v)", err)
	}
}

// TestAnotherUserCannotTakeTheLock: flock needs only a descriptor open for reading, so
// a lock file any user can read would let any user take the lock and keep staticpod
// from starting. The file is root's alone; one that is not is refused, never locked.
func TestAnotherUserCannotTakeTheLock(t *testing.T) {
	needRoot(t, "runs a process as nobody: needs root")
	// A directory nobody may enter (t.TempDir's parent is root's alone), holding the
	// locked directory and the test binary, where nobody may run it.
	open, err := os.MkdirTemp("", "dirlock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(open) })
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, bin := filepath.Join(open, "root"), filepath.Join(open, "flocker")
	mustAcquire(t, dir).Release()
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	flocker := exec.Command(bin, "-test.run=^$")
	flocker.Env = append(os.Environ(), flockEnv+"="+filepath.Join(dir, FileName))
	flocker.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := flocker.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "permission denied") {
		t.Fatalf("nobody's flock of the lock file: %v, %s; want permission denied", err, out)
	}
	mustAcquire(t, dir).Release()

	// A lock file others may read (left by hand, or by a careless copy) is refused.
	if err := os.Chmod(filepath.Join(dir, FileName), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(dir); err == nil || !strings.Contains(err.Error(), "only it may read") {
		t.Errorf("Acquire with a lock file of mode 0644 = %v, want a refusal", err)
	}
}

// needRoot ends the test when it does not run as root: a skip, but a failure in CI
// (CI=true), where the tests run as root and must not pass without checking.
func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Getuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}
