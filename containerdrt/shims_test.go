package containerdrt

import (
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
)

// fakeProc is a /proc for tests: processes with a command line and, when they have a
// parent, a stat file.
type fakeProc string

func (p fakeProc) add(t *testing.T, pid, ppid int, start uint64, args ...string) {
	t.Helper()
	dir := filepath.Join(string(p), strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(args, "\x00")+"\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The command name may hold spaces and parentheses: the fields are read after its end.
	stat := fmt.Sprintf("%d (a (b) c) S %d 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0", pid, ppid, start)
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
}

// shim adds a shim of containerd /run/c.sock serving namespace ns for container id.
func (p fakeProc) shim(t *testing.T, pid int, ns, id string) {
	p.add(t, pid, 1, 100, "/usr/bin/containerd-shim-runc-v2", "-namespace", ns, "-id", id, "-address", "/run/c.sock")
}

// logger adds a log writer started by shim for the log file config names.
func (p fakeProc) logger(t *testing.T, pid, shim int, start uint64, config string) {
	p.add(t, pid, shim, start, "/var/lib/staticpod/bin/staticpod-helper", "logger", config)
}

func TestScanShims(t *testing.T) {
	proc := fakeProc(t.TempDir())
	proc.shim(t, 10, "ns1", "a")
	proc.add(t, 11, 1, 100, "/usr/bin/containerd-shim-runc-v2", "-namespace", "ns1", "-id", "b", "-address", "/run/other.sock")
	proc.shim(t, 12, "ns2", "c")
	proc.add(t, 13, 1, 100, "/usr/bin/containerd", "-namespace", "ns1", "-address", "/run/c.sock")
	proc.add(t, 14, 1, 100, "sleep", "-namespace", "ns1", "-address", "/run/c.sock")
	proc.logger(t, 20, 10, 500, "path=a")
	proc.logger(t, 21, 12, 500, "path=c") // another namespace's
	proc.add(t, 22, 10, 500, "sh", "-c", "sleep 1")
	shims, loggers := scanShims(string(proc), "/run/c.sock", "ns1")
	if want := []shimProc{{10, "a"}}; !slices.Equal(shims, want) {
		t.Errorf("shims %v, want %v", shims, want)
	}
	if want := []loggerProc{{PID: 20, Shim: 10, Config: "path=a", Start: 500}}; !slices.Equal(loggers, want) {
		t.Errorf("loggers %v, want %v", loggers, want)
	}
}

// A shim left serving a deleted namespace is killed; the others are not.
func TestKillShimsOf(t *testing.T) {
	left := exec.Command("sleep", "60")
	other := exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{left, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	// A /proc with the two processes, as shims of two namespaces.
	proc := t.TempDir()
	for c, ns := range map[*exec.Cmd]string{left: "gone", other: "kept"} {
		dir := filepath.Join(proc, strconv.Itoa(c.Process.Pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmdline := "/usr/bin/containerd-shim-runc-v2\x00-namespace\x00" + ns + "\x00-id\x00x\x00-address\x00/run/c.sock\x00"
		if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmdline), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := killShimsOf(proc, "/run/c.sock", "gone"); n != 1 {
		t.Fatalf("killShimsOf killed %d, want 1", n)
	}
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the shim of the deleted namespace still runs")
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the shim of another namespace was killed: %v", err)
	}
}
