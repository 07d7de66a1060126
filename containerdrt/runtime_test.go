package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/snapshots"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/logs"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

const testImage = "docker.io/library/busybox:staticpod-test"

// testRuntime is a Runtime on the shared test daemon, in a namespace of its own, with
// the busybox test image imported.
type testRuntime struct {
	*Runtime
	cfg Config
	ctx context.Context
}

func newTestRuntime(t testing.TB, opts ...func(*Config)) *testRuntime {
	t.Helper()
	return newTestRuntimeOn(t, ctd.Daemon(t), opts...)
}

// newTestRuntimeOn is newTestRuntime on daemon d: one of the test's own, say.
func newTestRuntimeOn(t testing.TB, d *testenv.Daemon, opts ...func(*Config)) *testRuntime {
	t.Helper()
	ns := d.Namespace(t)
	ctx := d.Context(t, ns)
	d.MustImportImage(t, ns, testenv.ImageOptions{Ref: testImage})
	cfg := Config{
		Address:   d.Address,
		Namespace: ns,
		RootDir:   t.TempDir(),
		PodLogDir: t.TempDir(),
		Self:      testBinary(t),
		Log:       LogConfig{ContainersDir: t.TempDir()},
		FIFODir:   d.FIFODir(),
		Logger:    slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return &testRuntime{Runtime: r, cfg: cfg, ctx: ctx}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// loadPod turns a manifest into a pod as the runner gets it: defaulted, validated and
// with its static identity.
func loadPod(t testing.TB, manifest string) *corev1.Pod {
	t.Helper()
	res := manifests.Load([]byte(manifest), manifests.Options{NodeName: "node1", Source: manifests.Source{Kind: manifests.SourceFile, Location: t.Name()}})
	if len(res.Errors) > 0 || len(res.Pods) != 1 {
		t.Fatalf("manifest: %v", res.Errors)
	}
	return res.Pods[0]
}

// mustRunPod starts pod's sandbox (if it needs one) and all its containers, with the
// images of its image volumes, and removes everything when the test ends. It returns
// the containers by name.
func (r *testRuntime) mustRunPod(t *testing.T, pod *corev1.Pod) map[string]runner.Container {
	t.Helper()
	return r.mustRunPodWith(t, pod, manifests.Objects{})
}

// mustRunPodWith is mustRunPod with the ConfigMaps and Secrets of the pod's source.
func (r *testRuntime) mustRunPodWith(t *testing.T, pod *corev1.Pod, objs manifests.Objects) map[string]runner.Container {
	t.Helper()
	cfg, err := r.PreparePod(r.ctx, pod, objs) // before the sandbox, as a worker
	if err != nil {
		t.Fatalf("PreparePod: %v", err)
	}
	var sandbox *runner.Container
	if runner.NeedsSandbox(pod) {
		sb, err := r.StartSandbox(r.ctx, pod, cfg, 0)
		if err != nil {
			t.Fatalf("StartSandbox: %v", err)
		}
		sandbox = &sb
		t.Cleanup(func() { r.mustRemove(t, sb.ID) })
	}
	vols := map[string]runner.Image{}
	for _, v := range pod.Spec.Volumes {
		if v.Image == nil {
			continue
		}
		img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: v.Image.Reference, Policy: v.Image.PullPolicy})
		if err != nil {
			t.Fatalf("EnsureImage %s of volume %s: %v", v.Image.Reference, v.Name, err)
		}
		vols[v.Name] = img
	}
	out := map[string]runner.Container{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: c.Image, Policy: c.ImagePullPolicy})
		if err != nil {
			t.Fatalf("EnsureImage %s: %v", c.Image, err)
		}
		req := runner.CreateRequest{Pod: pod, Container: c, Hash: manifests.ContainerHash(c), Sandbox: sandbox, Image: img, ImageVolumes: vols, Objects: objs}
		created, err := r.create(req)
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", c.Name, err)
		}
		t.Cleanup(func() { r.mustRemove(t, created.ID) })
		if err := r.StartContainer(r.ctx, created.ID); err != nil {
			t.Fatalf("StartContainer %s: %v", c.Name, err)
		}
		out[c.Name] = created
	}
	t.Cleanup(func() {
		if err := r.RemovePodData(context.WithoutCancel(r.ctx), pod.UID); err != nil {
			t.Errorf("RemovePodData: %v", err)
		}
	})
	return out
}

// create prepares the pod's host side and creates the container with what that
// resolved of the pod, as a worker does.
func (r *testRuntime) create(req runner.CreateRequest) (runner.Container, error) {
	cfg, err := r.PreparePod(r.ctx, req.Pod, req.Objects)
	if err != nil {
		return runner.Container{}, err
	}
	req.Config = cfg
	return r.CreateContainer(r.ctx, req)
}

// startSandbox starts the pod's sandbox with what the pod resolves to, without
// preparing its host side first.
func (r *testRuntime) startSandbox(pod *corev1.Pod, attempt int, objs manifests.Objects) (runner.Container, error) {
	cfg, err := r.podConfig(pod, objs)
	if err != nil {
		return runner.Container{}, err
	}
	return r.StartSandbox(r.ctx, pod, cfg, attempt)
}

func (r *testRuntime) mustRemove(t *testing.T, id string) {
	ctx := context.WithoutCancel(r.ctx) // cleanups run after the test's context ends
	if err := r.StopContainer(ctx, id, 0); err != nil {
		t.Errorf("StopContainer %s: %v", id, err)
	}
	if err := r.RemoveContainer(ctx, id); err != nil {
		t.Errorf("RemoveContainer %s: %v", id, err)
	}
}

// mustCreateUnstarted creates, and does not start, the container of a host-network pod
// named name that sleeps, and removes it when the test ends.
func (r *testRuntime) mustCreateUnstarted(t *testing.T, name string) runner.Container {
	t.Helper()
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+name+"}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	c := &pod.Spec.Containers[0]
	img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: c.Image, Policy: c.ImagePullPolicy})
	if err != nil {
		t.Fatal(err)
	}
	created, err := r.create(runner.CreateRequest{Pod: pod, Container: c, Hash: manifests.ContainerHash(c), Image: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mustRemove(t, created.ID) })
	return created
}

// find returns the container with id from a relist (see relist).
func (r *testRuntime) find(t *testing.T, id string) (runner.Container, bool) {
	t.Helper()
	all, err := r.relist(r.ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, c := range all {
		if c.ID == id {
			return c, true
		}
	}
	return runner.Container{}, false
}

// awaitState relists (see relist), as the runner does, until the container is in state.
func (r *testRuntime) awaitState(t *testing.T, id string, state runner.State) runner.Container {
	t.Helper()
	var c runner.Container
	defer func() { // runs as a failed Await ends the test: show what was listed instead
		if c.State != state {
			t.Logf("container %s: %+v", id, c)
		}
	}()
	testenv.Await(t, fmt.Sprintf("container %s %s", id, state), 30*time.Second, func() bool {
		c, _ = r.find(t, id)
		return c.State == state
	})
	return c
}

func TestPodContainersShareLoopbackAndHostname(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: pair}
spec:
  containers:
  - name: server
    image: `+testImage+`
    command: ["sh", "-c", "mkdir -p /www && echo pong > /www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /www"]
  - name: client
    image: `+testImage+`
    command: ["sh", "-c", "for i in $(seq 100); do wget -q -O /tmp/got http://127.0.0.1:8080/ && break; sleep 0.1; done; echo \"$(cat /tmp/got) $(hostname)\" > /dev/termination-log; test -s /tmp/got"]
`)
	cs := r.mustRunPod(t, pod)
	got := r.awaitState(t, cs["client"].ID, runner.StateExited)
	if got.ExitCode != 0 || got.Reason != "Completed" {
		t.Fatalf("client exited %d (%s), want 0 (Completed): %q", got.ExitCode, got.Reason, got.Message)
	}
	if want := "pong pair-node1\n"; got.Message != want {
		t.Errorf("client saw %q, want %q (the server's page over loopback, and the pod's hostname)", got.Message, want)
	}
}

func TestHostNetworkPodSeesHostInterfaces(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  containers:
  - name: c
    image: `+testImage+`
    command: ["sh", "-c", "cat /proc/net/dev > /dev/termination-log"]
`)
	if runner.NeedsSandbox(pod) {
		t.Fatal("a host-network pod should need no sandbox")
	}
	cs := r.mustRunPod(t, pod)
	got := r.awaitState(t, cs["c"].ID, runner.StateExited)
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifaces {
		if !strings.Contains(got.Message, i.Name+":") {
			t.Errorf("host interface %s not seen in the container:\n%s", i.Name, got.Message)
		}
	}
}

func TestListRebuildsStateAfterRestart(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: longrun}
spec:
  containers:
  - name: c
    image: `+testImage+`
    command: ["sleep", "3600"]
`)
	cs := r.mustRunPod(t, pod)
	before := r.awaitState(t, cs["c"].ID, runner.StateRunning)

	again, err := New(r.ctx, r.cfg) // a restarted staticpod: nothing but containerd to go on
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	all, err := again.relist(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range all {
		kinds = append(kinds, string(c.Kind))
		if c.ID != before.ID {
			continue
		}
		if c.PID != before.PID || c.PID == 0 || c.State != runner.StateRunning {
			t.Errorf("after restart: pid %d state %s, want pid %d running", c.PID, c.State, before.PID)
		}
		if c.PodUID != pod.UID || c.PodName != "longrun-node1" || c.PodNamespace != "default" || c.Name != "c" ||
			c.Hash != manifests.ContainerHash(&pod.Spec.Containers[0]) || c.Source != manifests.SourceFile || c.StartedAt.IsZero() {
			t.Errorf("after restart: identity lost: %+v", c)
		}
	}
	if strings.Join(kinds, ",") != "sandbox,container" && strings.Join(kinds, ",") != "container,sandbox" {
		t.Errorf("List kinds = %v, want one sandbox and one container", kinds)
	}
}

func TestStopHonoursSignalAndGrace(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: stopper}
spec:
  hostNetwork: true
  containers:
  - name: polite
    image: `+testImage+`
    command: ["sh", "-c", "trap 'exit 7' TERM; while true; do sleep 0.1; done"]
  - name: stubborn
    image: `+testImage+`
    command: ["sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"]
`)
	cs := r.mustRunPod(t, pod)
	polite := r.awaitState(t, cs["polite"].ID, runner.StateRunning)
	stubborn := r.awaitState(t, cs["stubborn"].ID, runner.StateRunning)
	awaitSignalMask(t, polite.PID, "SigCgt", syscall.SIGTERM) // the shells installed their traps
	awaitSignalMask(t, stubborn.PID, "SigIgn", syscall.SIGTERM)

	if err := r.StopContainer(r.ctx, polite.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := r.awaitState(t, polite.ID, runner.StateExited); got.ExitCode != 7 {
		t.Errorf("polite container exited %d, want 7 from its TERM trap", got.ExitCode)
	}

	const grace = 2 * time.Second
	start := time.Now()
	if err := r.StopContainer(r.ctx, stubborn.ID, grace); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < grace {
		t.Errorf("a container that ignores SIGTERM was killed after %v, before its grace period of %v", took, grace)
	}
	if got := r.awaitState(t, stubborn.ID, runner.StateExited); got.ExitCode != 137 || got.Reason != "Error" {
		t.Errorf("stubborn container exited %d (%s), want 137 (Error)", got.ExitCode, got.Reason)
	}
}

// awaitSignalMask waits until sig is in the process's signal mask named mask in
// /proc/PID/status: SigCgt once it has a handler, SigIgn once it ignores the signal.
func awaitSignalMask(t *testing.T, pid uint32, mask string, sig syscall.Signal) {
	t.Helper()
	testenv.Await(t, fmt.Sprintf("process %d to have %s in %s", pid, sig, mask), 30*time.Second, func() bool {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatalf("process %d: %v", pid, err)
		}
		for line := range strings.Lines(string(status)) {
			if hex, ok := strings.CutPrefix(line, mask+":"); ok {
				bits, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
				return err == nil && bits&(1<<(sig-1)) != 0
			}
		}
		return false
	})
}

func TestExitCodesReasonsAndMessages(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: exits}
spec:
  hostNetwork: true
  restartPolicy: Never
  containers:
  - name: ok
    image: `+testImage+`
    command: ["true"]
  - name: fails
    image: `+testImage+`
    command: ["sh", "-c", "echo 'disk on fire' > /dev/termination-log; exit 3"]
  - name: oom
    image: `+testImage+`
    command: ["sh", "-c", "tail /dev/zero"]
    resources:
      limits: {memory: 16Mi}
`)
	cs := r.mustRunPod(t, pod)
	for name, want := range map[string]struct {
		code   int32
		reason string
		msg    string
	}{
		"ok":    {0, "Completed", ""},
		"fails": {3, "Error", "disk on fire\n"},
		"oom":   {137, "OOMKilled", ""},
	} {
		got := r.awaitState(t, cs[name].ID, runner.StateExited)
		if got.ExitCode != want.code || got.Reason != want.reason || got.Message != want.msg {
			t.Errorf("%s: exit %d reason %q message %q; want %d %q %q", name, got.ExitCode, got.Reason, got.Message, want.code, want.reason, want.msg)
		}
		if got.FinishedAt.IsZero() || got.StartedAt.IsZero() || got.FinishedAt.Before(got.StartedAt) {
			t.Errorf("%s: started %v finished %v", name, got.StartedAt, got.FinishedAt)
		}
	}
}

func TestExec(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: execd}
spec:
  containers:
  - name: c
    image: `+testImage+`
    command: ["sleep", "3600"]
    env: [{name: GREETING, value: hello}]
`)
	cs := r.mustRunPod(t, pod)
	r.awaitState(t, cs["c"].ID, runner.StateRunning)
	var out, errOut strings.Builder
	code, err := r.Exec(r.ctx, cs["c"].ID, runner.ExecRequest{
		Command: []string{"sh", "-c", "echo $GREETING $(hostname); echo oops >&2; exit 4"},
		Stdout:  &out, Stderr: &errOut,
	})
	if err != nil {
		t.Fatal(err)
	}
	if code != 4 || out.String() != "hello execd-node1\n" || errOut.String() != "oops\n" {
		t.Errorf("Exec = %d, stdout %q, stderr %q; want 4, the container's env and hostname, and its stderr", code, out.String(), errOut.String())
	}
	var echoed strings.Builder
	code, err = r.Exec(r.ctx, cs["c"].ID, runner.ExecRequest{Command: []string{"cat"}, Stdin: strings.NewReader("piped\n"), Stdout: &echoed})
	if err != nil || code != 0 || echoed.String() != "piped\n" {
		t.Errorf("cat with stdin = %d, %v, %q; want the input echoed and cat ended by its end", code, err, echoed.String())
	}
}

func TestRemoveLeavesNothing(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: gone}
spec:
  containers:
  - name: c
    image: `+testImage+`
    command: ["sh", "-c", "echo hi; sleep 3600"]
    volumeMounts: [{name: scratch, mountPath: /scratch}, {name: scratch, mountPath: /sub, subPath: sub}]
  volumes:
  - name: scratch
    emptyDir: {medium: Memory}
`)
	t.Run("run", func(t *testing.T) {
		cs := r.mustRunPod(t, pod) // its cleanups stop and remove everything
		r.awaitState(t, cs["c"].ID, runner.StateRunning)
	})
	all, err := r.relist(r.ctx)
	if err != nil || len(all) != 0 {
		t.Errorf("List after removal = %v, %v; want nothing", all, err)
	}
	if m := podtest.MountsAt(t, r.cfg.RootDir); len(m) > 0 {
		t.Errorf("mounts left under the root dir: %v", podtest.DescribeMounts(m))
	}
	for _, dir := range []string{filepath.Join(r.cfg.RootDir, podsDir, string(pod.UID)), filepath.Join(r.cfg.PodLogDir, "default_gone-node1_"+string(pod.UID))} {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after removal (%v)", dir, err)
		}
	}
	n := 0
	err = r.client.SnapshotService("").Walk(r.ctx, func(context.Context, snapshots.Info) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if n > 1 { // the image's one layer stays; containers' snapshots are gone
		t.Errorf("%d snapshots left, want only the image's layer", n)
	}
	// Idempotence: removing what is gone is no error.
	if err := r.RemoveContainer(r.ctx, "no-such-container"); err != nil {
		t.Errorf("RemoveContainer(missing) = %v, want nil", err)
	}
	if err := r.StopContainer(r.ctx, "no-such-container", time.Second); err != nil {
		t.Errorf("StopContainer(missing) = %v, want nil", err)
	}
}

func TestTerminationMessageFallsBackToLogs(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: fallback}
spec:
  hostNetwork: true
  containers:
  - name: fails
    image: `+testImage+`
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "for i in $(seq 100); do echo line $i; done; echo boom >&2; exit 2"]
  - name: writes
    image: `+testImage+`
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "echo noise; echo 'own message' > /dev/termination-log; exit 2"]
  - name: long
    image: `+testImage+`
    command: ["sh", "-c", "for i in $(seq 500); do printf 'message \\xff' ; done > /dev/termination-log; exit 1"]
`)
	cs := r.mustRunPod(t, pod)
	// The first List that reports the exit must report it whole: the runner copies a
	// terminated state into lastState at first sight and never reads it again.
	got := r.awaitState(t, cs["fails"].ID, runner.StateExited).Message
	// stdout and stderr are separate pipes: where "boom" lands in the log depends on
	// which the log writer read first, as on the kubelet. The message is the log's end.
	var want strings.Builder
	if err := logs.Read(r.ctx, cs["fails"].LogPath, logs.ReadOptions{Tail: 80}, &want); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if got != want.String() || len(lines) != 80 || !slices.Contains(lines, "line 100") {
		t.Errorf("message of a failed container with FallbackToLogsOnError at first sight: %d lines, %q ... %q; want the last 80 lines of its log", len(lines), lines[0], lines[len(lines)-1])
	}
	if got := r.awaitState(t, cs["writes"].ID, runner.StateExited).Message; got != "own message\n" {
		t.Errorf("message = %q, want the termination-message file first", got)
	}
	// 5000 bytes, not all text: the kubelet keeps 4096, containerd's label a little less.
	if got := r.awaitState(t, cs["long"].ID, runner.StateExited); got.ExitCode != 1 || !strings.HasPrefix(got.Message, "message \uFFFDmessage") || len(got.Message) < 4000 {
		t.Errorf("long message: exit %d, %d bytes %.20q...; want exit 1 with about 4 KiB of the message", got.ExitCode, len(got.Message), got.Message)
	}

	// An exit recorded with its message pending (staticpod stopped between the steps of
	// a reap) is not reported as terminated until the message is recorded, which the
	// next repair does.
	c, err := r.client.LoadContainer(r.ctx, cs["fails"].ID)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := c.SetLabels(r.ctx, map[string]string{labelMessage: "", labelMessagePending: "log"})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	info.Labels = labels
	if pending, err := toContainer(info, nil); err != nil || pending.State != runner.StateUnknown || pending.ExitCode != 0 {
		t.Errorf("a container whose message is pending = %s (exit %d, err %v), want unknown", pending.State, pending.ExitCode, err)
	}
	if again, _ := r.find(t, cs["fails"].ID); again.State != runner.StateExited || again.ExitCode != 2 || again.Message != want.String() {
		t.Errorf("after an interrupted reap: %s exit %d with a %d-byte message, want exited 2 with the log's end", again.State, again.ExitCode, len(again.Message))
	}
}

func TestLostTaskIsReportedExited(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: lost}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	cs := r.mustRunPod(t, pod)
	running := r.awaitState(t, cs["c"].ID, runner.StateRunning)
	// Without its shim nobody kills the container's process: containerd only forgets
	// the task. The runtime must (checked below); the cleanup is a safety net.
	t.Cleanup(func() { syscall.Kill(int(running.PID), syscall.SIGKILL) })
	shim := r.shimOf(t)
	if err := syscall.Kill(shim, syscall.SIGKILL); err != nil { // what a reboot or a crashed shim leaves
		t.Fatal(err)
	}
	got := r.awaitState(t, cs["c"].ID, runner.StateExited)
	if got.ExitCode != 255 || got.Reason != "Unknown" {
		t.Errorf("a container whose task vanished: exit %d reason %q, want 255 Unknown", got.ExitCode, got.Reason)
	}
	what := fmt.Sprintf("the container's process %d gone after its shim died, not running beside the restart", running.PID)
	testenv.Await(t, what, 10*time.Second, func() bool { // gone, or a zombie of init's
		return !shims.Alive(int(running.PID))
	})
}

// runc's state of a container whose containerd lost its own (killed, its state
// directory gone) made every later start of the same ID fail with "container with
// given ID already exists". State whose process is gone is removed and the start goes
// on; state of a live process is kept.
func TestStaleRuncStateIsRemoved(t *testing.T) {
	r := newTestRuntime(t)
	created := r.mustCreateUnstarted(t, "stale")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	writeState := func(id string, pid int) string {
		dir := filepath.Join(shims.RuncRoot, r.cfg.Namespace, id)
		if err := os.MkdirAll(dir, 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(fmt.Sprintf(`{"init_process_pid": %d}`, pid)), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	writeState(created.ID, dead.Process.Pid) // replaced by the container's own when it starts
	if err := r.StartContainer(r.ctx, created.ID); err != nil {
		t.Fatalf("StartContainer over stale runc state: %v", err)
	}
	r.awaitState(t, created.ID, runner.StateRunning)

	live := writeState("live-one", os.Getpid())
	t.Cleanup(func() { os.RemoveAll(live) })
	if shims.RemoveStaleRuncState(shims.RuncRoot, r.cfg.Namespace, "live-one") {
		t.Error("removed the runc state of a live process")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("state of a live process: %v", err)
	}
}

// relist lists and repairs as the runner's loop does after each relist: List, Repair,
// and List again when the repair changed what List reports.
func (r *Runtime) relist(ctx context.Context) ([]runner.Container, error) {
	all, err := r.List(ctx)
	if err != nil || !r.Repair(ctx) {
		return all, err
	}
	return r.List(ctx)
}
