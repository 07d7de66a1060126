package shims

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeProc is a /proc for tests: processes with a command line and a stat file; the
// shims among them run as root from a containerd-shim-runc-v2 in a directory on PATH,
// the log writers from the helper binary (see helper).
type fakeProc string

// newFakeProc makes an empty fakeProc, and its shim and helper binaries.
func newFakeProc(t *testing.T) fakeProc {
	t.Helper()
	p := fakeProc(t.TempDir())
	bin := filepath.Join(string(p), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "containerd-shim-runc-v2"), []byte("a shim"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "sleep"), []byte("not a shim"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.helper(), []byte("the log writer"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(filepath.ListSeparator)+os.Getenv("PATH"))
	return p
}

func (p fakeProc) add(t *testing.T, pid, ppid int, start uint64, args ...string) {
	t.Helper()
	dir := filepath.Join(string(p), strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(args, "\x00")+"\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.setStart(t, pid, ppid, start)
	p.run(t, pid, 0, "bin/"+filepath.Base(args[0]))
}

// setStart writes the stat file of process pid: its parent and start time.
func (p fakeProc) setStart(t *testing.T, pid, ppid int, start uint64) {
	t.Helper()
	// The command name may hold spaces and parentheses: the fields are read after its end.
	stat := fmt.Sprintf("%d (a (b) c) S %d 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0", pid, ppid, start)
	if err := os.WriteFile(filepath.Join(string(p), strconv.Itoa(pid), "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run makes process pid run as user uid from the executable exe (under p, or absolute;
// " (deleted)" may end it), in the host's root directory.
func (p fakeProc) run(t *testing.T, pid, uid int, exe string) {
	t.Helper()
	dir := filepath.Join(string(p), strconv.Itoa(pid))
	status := fmt.Sprintf("Name:\tx\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t%d\t%d\t%d\t%d\nGid:\t0\t0\t0\t0\n", uid, uid, uid, uid)
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(exe) {
		exe = filepath.Join(string(p), exe)
	}
	for name, target := range map[string]string{"exe": exe, "root": "/"} {
		os.Remove(filepath.Join(dir, name))
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// helper is the binary the log writers run (containerdrt's Config.Self).
func (p fakeProc) helper() string {
	return filepath.Join(string(p), "bin", "staticpod-helper")
}

// inRoot makes process pid run in root directory dir: a container's.
func (p fakeProc) inRoot(t *testing.T, pid int, dir string) {
	t.Helper()
	link := filepath.Join(string(p), strconv.Itoa(pid), "root")
	os.Remove(link)
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
}

// listens makes process pid listen on a unix socket at path (its descriptor 3).
func (p fakeProc) listens(t *testing.T, pid int, path string) {
	t.Helper()
	dir := filepath.Join(string(p), strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("socket:[4242]", filepath.Join(dir, "fd", "3")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	table := "Num       RefCount Protocol Flags    Type St Inode Path\n0000000000000000: 00000002 00000000 00010000 0001 01 4242 " + path + "\n"
	if err := os.WriteFile(filepath.Join(dir, "net", "unix"), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
}

// reusedWhileRead makes the command line of process pid a named pipe: when it is first
// read, the process exits and another takes its PID (started at start, with command
// line args) before the reader gets the first one's command line. Later reads get the
// other's. The returned channel is closed once that happened.
func (p fakeProc) reusedWhileRead(t *testing.T, pid, ppid int, start uint64, args ...string) <-chan struct{} {
	t.Helper()
	dir := filepath.Join(string(p), strconv.Itoa(pid))
	path := filepath.Join(dir, "cmdline")
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	then := filepath.Join(dir, "cmdline.then")
	if err := os.WriteFile(then, []byte(strings.Join(args, "\x00")+"\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	stat := fmt.Sprintf("%d (x) S %d 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0", pid, ppid, start)
	read, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		w, err := os.OpenFile(path, os.O_WRONLY, 0) // until a reader opens it
		if err != nil {
			return
		}
		os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
		os.Rename(then, path) // for the next readers; this one has the pipe
		w.Write(first)
		close(read)
		w.Close() // the reader's end of file
	}()
	t.Cleanup(func() {
		// Let the writer go if nothing read the command line.
		if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer r.Close()
		}
		<-done
	})
	return read
}

// shim adds a shim of containerd /run/c.sock serving namespace ns for container id.
func (p fakeProc) shim(t *testing.T, pid int, ns, id string) {
	p.add(t, pid, 1, 100, "/usr/bin/containerd-shim-runc-v2", "-namespace", ns, "-id", id, "-address", "/run/c.sock")
}

// logger adds a log writer started by shim for the log file config names.
func (p fakeProc) logger(t *testing.T, pid, shim int, start uint64, config string) {
	p.add(t, pid, shim, start, "/var/lib/staticpod/bin/staticpod-helper", "logger", config)
}

// Shims are found by their command lines, among the processes that root runs from a
// containerd shim binary: anyone can start a process with a shim's command line.
func TestScanShims(t *testing.T) {
	proc := newFakeProc(t)
	proc.shim(t, 10, "ns1", "a_c_0_1")
	proc.add(t, 11, 1, 100, "/usr/bin/containerd-shim-runc-v2", "-namespace", "ns1", "-id", "b_c_0_1", "-address", "/run/other.sock")
	proc.shim(t, 12, "ns2", "c_c_0_1")
	proc.add(t, 13, 1, 100, "/usr/bin/containerd", "-namespace", "ns1", "-address", "/run/c.sock")
	proc.add(t, 14, 1, 100, "sleep", "-namespace", "ns1", "-address", "/run/c.sock")
	proc.logger(t, 20, 10, 500, "path=a")
	proc.logger(t, 21, 12, 500, "path=c") // another namespace's
	proc.add(t, 22, 10, 500, "sh", "-c", "sleep 1")
	proc.add(t, 30, 1, 300, "/usr/bin/containerd-shim-runc-v2", "-namespace", "ns1", "-id", "unix_c_0_1", "-address", "unix:///run/c.sock")
	proc.add(t, 31, 1, 300, "/usr/bin/containerd-shim-runc-v2", "-namespace", "ns1", "-id", "../../etc", "-address", "/run/c.sock")

	// Processes with a shim's command line that are no shim of containerd's.
	fake := func(pid int, id string) {
		proc.add(t, pid, 1, 200, "/usr/bin/containerd-shim-runc-v2", "-namespace", "ns1", "-id", id, "-address", "/run/c.sock")
	}
	fake(40, "user_c_0_1")
	proc.run(t, 40, 65534, "bin/containerd-shim-runc-v2") // the right binary, run by a user
	fake(41, "setuid_c_0_1")
	proc.run(t, 41, 0, "bin/containerd-shim-runc-v2")
	os.WriteFile(filepath.Join(string(proc), "41", "status"), []byte("Uid:\t65534\t0\t0\t0\n"), 0o644) // effective root only
	fake(42, "other_c_0_1")
	proc.run(t, 42, 0, "bin/sleep") // root, but no shim binary
	fake(43, "copy_c_0_1")
	copied := filepath.Join(t.TempDir(), "containerd-shim-runc-v2") // a shim's name off PATH
	os.WriteFile(copied, []byte("a shim"), 0o755)
	proc.run(t, 43, 0, copied)
	fake(44, "gone_c_0_1")
	proc.run(t, 44, 0, copied+" (deleted)")
	fake(45, "upgraded_c_0_1")
	proc.run(t, 45, 0, "bin/containerd-shim-runc-v2 (deleted)") // replaced since: taken by its path

	shims, loggers := scan(string(proc), "/run/c.sock", "ns1", proc.helper())
	want := []Proc{{10, 100, "a_c_0_1"}, {30, 300, "unix_c_0_1"}, {31, 300, ""}, {45, 200, "upgraded_c_0_1"}}
	if diff := cmp.Diff(want, shims); diff != "" {
		t.Errorf("scan shims (-want +got):\n%s", diff)
	}
	if want := []LogWriter{{PID: 20, Shim: 10, Config: "path=a", Start: 500}}; !slices.Equal(loggers, want) {
		t.Errorf("loggers %v, want %v", loggers, want)
	}
}

// A shim's -address is the socket of the runtime's containerd however either is
// spelled: a unix:// URL, a path through a symlinked directory, or a symlink to the
// socket file (as k3s links /run/containerd/containerd.sock to its own), whether the
// socket is there or not (containerd down: then by the spelling of its directory).
func TestScanShimsAcrossSpellingsOfTheSocket(t *testing.T) {
	proc := newFakeProc(t)
	run := t.TempDir()
	link := filepath.Join(t.TempDir(), "var-run") // as /var/run links to /run
	if err := os.Symlink(run, link); err != nil {
		t.Fatal(err)
	}
	real, missing := filepath.Join(run, "containerd.sock"), filepath.Join(run, "down.sock")
	listenUnix(t, real)
	linked := filepath.Join(t.TempDir(), "containerd.sock")
	if err := os.Symlink(real, linked); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		shim      string // its -address: the path containerd was started with
		addresses []string
	}{
		{shim: real, addresses: []string{real, "unix://" + real, filepath.Join(link, "containerd.sock"), "unix://" + filepath.Join(link, "containerd.sock"), real + "/", linked, "unix://" + linked}},
		{shim: linked, addresses: []string{real, filepath.Join(link, "containerd.sock"), linked}},
		{shim: missing, addresses: []string{missing, "unix://" + filepath.Join(link, "down.sock")}},
	} {
		proc.add(t, 10, 1, 100, "/usr/bin/containerd-shim-runc-v2", "-namespace", "ns", "-id", "a_c_0_1", "-address", tc.shim)
		for _, address := range tc.addresses {
			if shims := Find(string(proc), address, "ns"); len(shims) != 1 {
				t.Errorf("Find(%s) = %v, want the shim of %s", address, shims, tc.shim)
			}
		}
		if shims := Find(string(proc), filepath.Join(run, "other.sock"), "ns"); len(shims) != 0 {
			t.Errorf("Find of another socket = %v, want none", shims)
		}
	}
}

// A shim left serving a deleted namespace is killed; the others are not, nor a process
// that took the PID of one after it was looked at.
func TestKill(t *testing.T) {
	left := exec.Command("sleep", "60")
	other := exec.Command("sleep", "60")
	reused := exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{left, other, reused} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	// A /proc with the three processes as shims of two namespaces; the third one's PID
	// was a shim's that started at another time.
	proc := newFakeProc(t)
	for c, ns := range map[*exec.Cmd]string{left: "gone", other: "kept", reused: "gone"} {
		pid := c.Process.Pid
		proc.add(t, pid, 1, 0, "/usr/bin/containerd-shim-runc-v2", "-namespace", ns, "-id", "x_c_0_1", "-address", "/run/c.sock")
		_, start, ok := parentAndStart("/proc", pid)
		if !ok {
			t.Fatalf("no start time of process %d", pid)
		}
		proc.setStart(t, pid, 1, start)
	}
	shims := Find(string(proc), "/run/c.sock", "gone")
	if len(shims) != 2 {
		t.Fatalf("Find = %v, want the two of namespace gone", shims)
	}
	proc.add(t, reused.Process.Pid, 1, 1, "sleep", "60") // the shim exited, its PID is another's
	for _, s := range shims {
		if s.PID == reused.Process.Pid {
			if err := Signal(string(proc), s.PID, s.Start, syscall.SIGKILL); !errors.Is(err, ErrOtherProcess) {
				t.Errorf("Signal to a PID reused since the look = %v, want %v", err, ErrOtherProcess)
			}
		}
	}
	if n := Kill(string(proc), "/run/c.sock", "gone"); n != 1 {
		t.Fatalf("Kill killed %d, want 1", n)
	}
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the shim of the deleted namespace still runs")
	}
	for _, c := range []*exec.Cmd{other, reused} {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("process %d was killed: %v", c.Process.Pid, err)
		}
	}
}
