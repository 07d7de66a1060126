package containerdrt

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestServesNamespace(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "ns1", "-id", "x", "-address", "/run/c.sock"}, true},
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "ns1", "-id", "x", "-address", "/run/other.sock"}, false},
		{[]string{"containerd-shim-runc-v2", "-namespace", "ns2", "-id", "x", "-address", "/run/c.sock"}, false},
		{[]string{"/usr/bin/containerd", "-namespace", "ns1", "-address", "/run/c.sock"}, false},
		{[]string{"sleep", "-namespace", "ns1", "-address", "/run/c.sock"}, false},
		{[]string{"containerd-shim-runc-v2", "-id", "ns1", "-address", "/run/c.sock"}, false},
		{nil, false},
	} {
		if got := servesNamespace(tc.args, "/run/c.sock", "ns1"); got != tc.want {
			t.Errorf("servesNamespace(%q, /run/c.sock, ns1) = %v, want %v", tc.args, got, tc.want)
		}
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
