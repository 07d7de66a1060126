// Package testenv gives staticpod's integration tests a real containerd: it starts private
// daemons (root, state, sockets and log in one temporary directory, no CRI), hands out a
// fresh namespace per test, builds busybox images as OCI layout archives without any
// registry, and tears everything down by PID — containers, shims, mounts, cgroups and
// files. It also holds two helpers every package's tests share: Await, the one poll with a
// deadline, and Buffer, a process's output that a test reads while it is written. It must
// not import any staticpod package but internal/ctrd, so that every package's tests can
// use it.
//
// Tests skip when the host cannot run containerd (no containerd or runc, not root) unless
// CI=true or STATICPOD_REQUIRE_CONTAINERD=1, when they fail instead. A package shares one
// daemon among its tests:
//
//	var ctd testenv.Shared
//
//	func TestMain(m *testing.M) { os.Exit(ctd.Main(m)) }
//
//	func TestRun(t *testing.T) {
//		d := ctd.Daemon(t)
//		ns := d.Namespace(t)
//		ctx := d.Context(t, ns)
//		image := d.MustImportImage(t, ns, testenv.ImageOptions{Ref: "example.com/busybox:test"})
//		...
//	}
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// CallTimeout bounds the context Context returns.
const CallTimeout = 2 * time.Minute

// ErrUnavailable classes errors from a host that cannot run the test environment.
var ErrUnavailable = errors.New("containerd test environment unavailable")

// Required reports whether tests must fail rather than skip when the environment is
// unavailable: in CI, or when STATICPOD_REQUIRE_CONTAINERD=1.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("STATICPOD_REQUIRE_CONTAINERD") == "1"
}

// skipOrFatal ends the test for err: a skip when the host merely lacks what the test
// needs and that is allowed, a failure otherwise.
func skipOrFatal(t testing.TB, err error) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs containerd: skipped in -short mode")
	}
	if errors.Is(err, ErrUnavailable) && !Required() {
		t.Skipf("%v (set CI=true or STATICPOD_REQUIRE_CONTAINERD=1 to fail instead)", err)
	}
	t.Fatal(err)
}

// Start starts a daemon for one test and stops it when the test ends. Prefer Shared: a
// daemon per test costs its start and stop.
func Start(t testing.TB) *Daemon {
	t.Helper()
	return StartWith(t, DaemonOptions{})
}

// StartWith is Start with options: a daemon whose root is a small tmpfs, say.
func StartWith(t testing.TB, opts DaemonOptions) *Daemon {
	t.Helper()
	if testing.Short() {
		t.Skip("needs containerd: skipped in -short mode")
	}
	d, err := StartDaemonWith(context.Background(), opts)
	if err != nil {
		skipOrFatal(t, err)
	}
	t.Cleanup(func() {
		if err := d.Stop(context.Background()); err != nil {
			t.Errorf("stop containerd: %v", err)
		}
	})
	return d
}

// Shared is one daemon for the tests of a package. It starts when a test first asks for
// it, so a run that selects no such test starts nothing, and stops when Main's tests are
// done.
type Shared struct {
	inMain bool      // set by Main before the tests run
	once   sync.Once // guards the start
	d      *Daemon   // set by the start, nil if it failed
	err    error     // why the start failed
}

// Main runs the package's tests and stops the daemon if one started. Call it from
// TestMain: os.Exit(shared.Main(m)).
func (s *Shared) Main(m *testing.M) int {
	s.inMain = true
	code := m.Run()
	if s.d != nil {
		if err := s.d.Stop(context.Background()); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stop containerd: %v\n", err)
			code = max(code, 1)
		}
	}
	return code
}

// Daemon returns the shared daemon, starting it on first use. It skips or fails t as
// Start does.
func (s *Shared) Daemon(t testing.TB) *Daemon {
	t.Helper()
	if testing.Short() {
		t.Skip("needs containerd: skipped in -short mode")
	}
	if !s.inMain {
		t.Fatal("testenv.Shared used without TestMain calling its Main; the daemon would never stop")
	}
	s.once.Do(func() {
		start := time.Now()
		s.d, s.err = StartDaemon(context.Background())
		if s.err == nil {
			t.Logf("started containerd at %s in %v", s.d.Address, time.Since(start).Round(time.Millisecond))
		}
	})
	if s.err != nil {
		skipOrFatal(t, s.err)
	}
	return s.d
}

// Namespace returns a new containerd namespace for t, named after it with a random suffix
// (so that runc state and cgroups, which are shared by all daemons on the host, never
// collide). When t ends its containers are deleted, and if t failed the daemon's log tail
// is printed.
func (d *Daemon) Namespace(t testing.TB) string {
	t.Helper()
	ns := namespaceFor(t.Name())
	d.own(ns)
	t.Cleanup(func() {
		if d.stopped.Load() {
			return // the test stopped the daemon, which purged everything
		}
		if t.Failed() {
			t.Log(d.LogTail(40))
		}
		if !d.running() {
			t.Errorf("purge namespace %s: containerd exited: %s", ns, d.cmd.ProcessState)
			return
		}
		if err := d.PurgeNamespace(context.Background(), ns); err != nil {
			t.Errorf("purge namespace %s: %v", ns, err)
		}
	})
	return ns
}

// namespaceFor returns a valid containerd namespace (letters and digits joined by single
// '-', at most 76 bytes) made from a test name.
func namespaceFor(testName string) string {
	var b strings.Builder
	dash := true // no leading dash
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	name := strings.TrimSuffix(b.String(), "-")
	if len(name) > 50 {
		name = strings.TrimSuffix(name[:50], "-")
	}
	if name == "" {
		name = "test"
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)
	return "t-" + name + "-" + hex.EncodeToString(suffix)
}

// Context returns a context in namespace ns that ends with t or after CallTimeout.
func (d *Daemon) Context(t testing.TB, ns string) context.Context {
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(t.Context(), ns), CallTimeout)
	t.Cleanup(cancel)
	return ctx
}

// MustImportImage imports and unpacks the busybox image opts describes into ns, or ends t.
func (d *Daemon) MustImportImage(t testing.TB, ns string, opts ImageOptions) client.Image {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), CallTimeout)
	defer cancel()
	image, err := ImportImage(ctx, d.Client, ns, opts)
	if errors.Is(err, ErrUnavailable) {
		skipOrFatal(t, err)
	}
	if err != nil {
		t.Fatalf("import image: %v", err)
	}
	return image
}
