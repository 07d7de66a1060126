package containerdrt

import (
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

// The one spelling addresses are compared in resolves the socket's directory, as
// /var/run links to /run.
func TestCanonicalSocket(t *testing.T) {
	run := t.TempDir()
	varRun := filepath.Join(t.TempDir(), "var-run")
	if err := os.Symlink(run, varRun); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(run, "containerd.sock")
	for _, address := range []string{want, "unix://" + want, filepath.Join(varRun, "containerd.sock"), "unix://" + varRun + "/containerd.sock", varRun + "/../var-run/containerd.sock"} {
		if got := canonicalSocket(address); got != want {
			t.Errorf("canonicalSocket(%q) = %q, want %q", address, got, want)
		}
	}
	if got := canonicalSocket("tcp://127.0.0.1:1"); got == want {
		t.Errorf("canonicalSocket of a TCP address = %q", got)
	}
}
