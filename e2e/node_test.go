package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

const (
	e2eImage  = "docker.io/library/busybox:e2e"
	e2eNode   = "node1"
	e2eRelist = 200 * time.Millisecond
)

// node is one machine as staticpod sees it: a manifest directory, a root dir, log
// dirs, and a containerd namespace on the shared test daemon.
type node struct {
	t         testing.TB
	d         *testenv.Daemon
	ns        string
	dir       string // root of everything below
	manifests string
	// devicePlugins is where the daemons serve device plugins' kubelet.sock, never the
	// host's: short, for a unix socket's path, and given by the environment, which a
	// binary of an older commit (the upgrade test's) ignores where it knows no flag.
	devicePlugins string
	rt            *containerdrt.Runtime // for looking, not for acting
	ctx           context.Context
	workDir       string // the daemons' working directory; "" for the test's
}

func newNode(t testing.TB) *node {
	t.Helper()
	return newNodeOn(t, ctd.Daemon(t))
}

// newNodeOn is newNode on a daemon of the test's own: one it may stop and start.
func newNodeOn(t testing.TB, d *testenv.Daemon) *node {
	t.Helper()
	ns := d.Namespace(t)
	n := &node{t: t, d: d, ns: ns, dir: t.TempDir(), ctx: d.Context(t, ns)}
	t.Cleanup(func() { unmountUnder(t, n.dir) }) // pods' tmpfs volumes outlive staticpod
	n.manifests = filepath.Join(n.dir, "manifests")
	if err := os.MkdirAll(n.manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	dp, err := os.MkdirTemp("", "spdp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dp) })
	n.devicePlugins = dp
	d.MustImportImage(t, ns, testenv.ImageOptions{Ref: e2eImage})
	rt, err := containerdrt.New(n.ctx, containerdrt.Config{
		Address: d.Address, Namespace: ns, RootDir: filepath.Join(n.dir, "observer"), PodLogDir: n.path("log/pods"), Self: binary,
		Observe: true, // the daemon under test owns the namespace: look, never reap
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	n.rt = rt
	return n
}

func (n *node) path(rel string) string { return filepath.Join(n.dir, rel) }

// staticpod is a running `staticpod run`.
type staticpod struct {
	t      testing.TB
	cmd    *exec.Cmd
	out    *testenv.Buffer // its log
	exited chan struct{}
}

// start runs `staticpod run` for the node; it is stopped (SIGTERM) when the test ends,
// and its log is printed if the test failed.
func (n *node) start(extra ...string) *staticpod {
	n.t.Helper()
	args := append(n.runArgs(), "--cni-conf-dir", "") // no pod network unless the test gives one: never the host's
	return n.launch(binary, append(args, extra...))
}

// runArgs are the flags of `staticpod run` for the node that every release knows.
func (n *node) runArgs() []string {
	return []string{"run",
		"--pod-manifest-path", n.manifests,
		"--root-dir", n.path("root"),
		"--pod-log-dir", n.path("log/pods"),
		"--container-log-dir", n.path("log/containers"),
		"--containerd-address", n.d.Address,
		"--containerd-namespace", n.ns,
		"--api-socket", n.path("staticpod.sock"),
		"--hostname-override", e2eNode,
		"--pleg-relist-period", e2eRelist.String(),
		"--log-level", "debug",
	}
}

// launch runs bin with args; it is stopped (SIGTERM) when the test ends, and its log is
// printed if the test failed.
func (n *node) launch(bin string, args []string) *staticpod {
	n.t.Helper()
	sp := &staticpod{t: n.t, cmd: exec.Command(bin, args...), out: &testenv.Buffer{}, exited: make(chan struct{})}
	sp.cmd.Stdout, sp.cmd.Stderr = sp.out, sp.out
	sp.cmd.Dir = n.workDir
	sp.cmd.Env = append(os.Environ(), "STATICPOD_DEVICE_PLUGIN_DIR="+n.devicePlugins)
	if err := sp.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	go func() { sp.cmd.Wait(); close(sp.exited) }()
	n.t.Cleanup(func() {
		sp.stop()
		if n.t.Failed() {
			n.t.Logf("log of %s:\n%s", bin, sp.out.String())
		}
	})
	return sp
}

// stop sends SIGTERM and waits for the exit.
func (sp *staticpod) stop() {
	sp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sp.exited:
	case <-time.After(time.Minute):
		sp.cmd.Process.Kill()
		<-sp.exited
	}
}

// kill9 kills staticpod the hard way.
func (sp *staticpod) kill9() {
	sp.cmd.Process.Kill()
	<-sp.exited
}

// awaitLog waits until staticpod's log says want; the log is printed if it never does.
func (sp *staticpod) awaitLog(want string) {
	sp.t.Helper()
	testenv.Await(sp.t, fmt.Sprintf("staticpod's log to say %q", want), 30*time.Second, func() bool {
		return strings.Contains(sp.out.String(), want)
	})
}

// write saves a manifest the way editors do: a temp file, then a rename.
func (n *node) write(name, content string) {
	n.t.Helper()
	tmp := filepath.Join(n.manifests, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(n.manifests, name)); err != nil {
		n.t.Fatal(err)
	}
}

// containers lists the node's containers (not sandboxes) by "pod/name/attempt".
func (n *node) containers() map[string]runner.Container {
	n.t.Helper()
	return n.containersBy(func(c runner.Container) string { return fmt.Sprintf("%s/%s/%d", c.PodName, c.Name, c.Attempt) })
}

// containersBy lists the node's containers (not sandboxes) by key.
func (n *node) containersBy(key func(runner.Container) string) map[string]runner.Container {
	n.t.Helper()
	all, err := n.rt.List(n.ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	out := map[string]runner.Container{}
	for _, c := range all {
		if c.Kind == runner.KindContainer {
			out[key(c)] = c
		}
	}
	return out
}

// await polls until cond holds for the node's containers, or fails after timeout.
func (n *node) await(what string, timeout time.Duration, cond func(map[string]runner.Container) bool) map[string]runner.Container {
	n.t.Helper()
	var cs map[string]runner.Container
	done := false
	defer func() { // runs as a failed Await ends the test: show what there was instead
		if !done {
			n.t.Logf("containers: %v", summary(cs))
		}
	}()
	testenv.Await(n.t, what, timeout, func() bool {
		cs = n.containers()
		return cond(cs)
	})
	done = true
	return cs
}

// awaitFile waits until the file at path contains want.
func awaitFile(t testing.TB, path, want string) {
	t.Helper()
	var data []byte
	defer func() { // runs as a failed Await ends the test: show what the file holds
		if !strings.Contains(string(data), want) {
			t.Logf("%s:\n%s", path, data)
		}
	}()
	testenv.Await(t, fmt.Sprintf("%s to contain %q", path, want), 30*time.Second, func() bool {
		data, _ = os.ReadFile(path)
		return strings.Contains(string(data), want)
	})
}

func summary(cs map[string]runner.Container) []string {
	var out []string
	for k, c := range cs {
		out = append(out, fmt.Sprintf("%s=%s(%d)", k, c.State, c.ExitCode))
	}
	return out
}

func running(key string) func(map[string]runner.Container) bool {
	return func(cs map[string]runner.Container) bool { return cs[key].State == runner.StateRunning }
}

func exited(key string) func(map[string]runner.Container) bool {
	return func(cs map[string]runner.Container) bool { return cs[key].State == runner.StateExited }
}

// podManifest is a one-container pod.
func podManifest(name, policy, script string, extra ...string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 2
%s  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
`, name, policy, strings.Join(extra, ""), e2eImage, script)
}

// unmountUnder unmounts everything mounted below dir, deepest first.
func unmountUnder(t testing.TB, dir string) {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Error(err)
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			points = append(points, f[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", p, err)
		}
	}
}
