package bench

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/internal/testenv"
)

// The shims of a containerd are found whichever spelling of its socket the benchmark
// was given: containerd starts them with its own, and a symlink to the socket file
// (as k3s links /run/containerd/containerd.sock) is the same containerd.
func TestShimsOfTheSameSocketSpelledAnotherWay(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "containerd.sock")
	ln, err := net.Listen("unix", real)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	linked := filepath.Join(dir, "linked.sock")
	if err := os.Symlink(real, linked); err != nil {
		t.Fatal(err)
	}
	shim := func(pid int, address, ns string, action ...string) testenv.Process {
		return testenv.Process{PID: pid, PPID: 1, Args: append([]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", ns, "-id", "x", "-address", address}, action...)}
	}
	procs := []testenv.Process{
		shim(10, real, "ns"),
		shim(11, "unix://"+real, "ns"),
		shim(12, real, "other"),
		shim(13, filepath.Join(dir, "other.sock"), "ns"),
		shim(14, real, "ns", "delete"),
	}
	want := map[int]bool{10: true, 11: true}
	if diff := cmp.Diff(want, Shims(procs, linked, "ns")); diff != "" {
		t.Errorf("Shims of %s (-want +got):\n%s", linked, diff)
	}
}
