package ctrd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/ctrd"
	"github.com/staticpod/staticpod/internal/testenv"
)

// TestStartThenStopLeavesNoDaemon starts a private containerd as `staticpod once
// --start-containerd` does, finds that a second Start leaves the answering one alone,
// and stops it: it no longer answers and its sockets are gone.
func TestStartThenStopLeavesNoDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("needs containerd: skipped in -short mode")
	}
	if _, err := exec.LookPath("containerd"); err != nil || os.Geteuid() != 0 {
		if testenv.Required() {
			t.Fatalf("needs containerd and root: %v, euid %d", err, os.Geteuid())
		}
		t.Skip("needs containerd and root")
	}
	dir, err := os.MkdirTemp("", "sp-ctrd-") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	address := filepath.Join(dir, "containerd.sock")
	s := ctrd.Under(dir, address, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	p, err := s.Start(ctx)
	if err != nil || p == nil {
		t.Fatalf("Start = %v, %v; want a started daemon", p, err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			p.Stop()
		}
	})
	if again, err := s.Start(ctx); again != nil || err != nil {
		t.Errorf("Start with a daemon answering = %v, %v; want nil, nil", again, err)
	}
	p.Stop()
	stopped = true
	if err := ctrd.Serving(ctx, address, time.Second); err == nil {
		t.Errorf("a containerd still answers at %s after Stop", address)
	}
	for _, sock := range []string{address, address + ".ttrpc"} {
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Errorf("%s is left after Stop (%v)", sock, err)
		}
	}
}
