package shims

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestSocketPath(t *testing.T) {
	for _, tc := range []struct {
		address, want string
		fails         bool
	}{
		{address: "/run/containerd/containerd.sock", want: "/run/containerd/containerd.sock"},
		{address: "unix:///run/containerd/containerd.sock", want: "/run/containerd/containerd.sock"},
		{address: "/run//containerd/./containerd.sock", want: "/run/containerd/containerd.sock"},
		{address: "unix://run/containerd.sock", fails: true},
		{address: "tcp://127.0.0.1:1234", fails: true},
		{address: "npipe:////./pipe/containerd", fails: true},
		{address: "containerd.sock", fails: true},
		{address: "", fails: true},
	} {
		got, err := SocketPath(tc.address)
		if got != tc.want || (err != nil) != tc.fails {
			t.Errorf("SocketPath(%q) = %q, %v; want %q, failing %v", tc.address, got, err, tc.want, tc.fails)
		}
	}
}

// listenUnix listens on a unix socket at path until the test ends.
func listenUnix(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
}

// A socket is the same however its path is spelled: a unix:// URL, through a symlinked
// directory (as /var/run links to /run), or a symlink to the socket file itself (as
// k3s links /run/containerd/containerd.sock to its own); the spelling of the directory
// alone decides for a socket that is not there (containerd down).
func TestSameSocket(t *testing.T) {
	run := t.TempDir()
	varRun := filepath.Join(t.TempDir(), "var-run")
	if err := os.Symlink(run, varRun); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(run, "containerd.sock")
	listenUnix(t, real)
	other := filepath.Join(run, "other.sock")
	listenUnix(t, other)
	linked := filepath.Join(t.TempDir(), "containerd.sock") // /run/containerd/containerd.sock -> k3s's
	if err := os.Symlink(real, linked); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(run, "missing.sock")
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{a: real, b: real, want: true},
		{a: real, b: "unix://" + real, want: true},
		{a: real, b: filepath.Join(varRun, "containerd.sock"), want: true},
		{a: real, b: "unix://" + varRun + "/containerd.sock", want: true},
		{a: real, b: varRun + "/../var-run/containerd.sock", want: true},
		{a: real, b: linked, want: true},
		{a: "unix://" + linked, b: filepath.Join(varRun, "containerd.sock"), want: true},
		{a: missing, b: filepath.Join(varRun, "missing.sock"), want: true},
		{a: real, b: other},
		{a: linked, b: other},
		{a: real, b: missing},
		{a: real, b: "tcp://127.0.0.1:1"},
		{a: "tcp://127.0.0.1:1", b: "tcp://127.0.0.1:1", want: true},
	} {
		if got := SameSocket(tc.a, tc.b); got != tc.want {
			t.Errorf("SameSocket(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := SameSocket(tc.b, tc.a); got != tc.want {
			t.Errorf("SameSocket(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}
