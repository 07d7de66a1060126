package containerdrt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// Sandbox processes, the namespaces a pod shares, and the shim a pod's containers share.

func TestSharedProcessNamespace(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: sharepid}
spec:
  shareProcessNamespace: true
  containers:
  - name: sleeper
    image: `+testImage+`
    command: ["sleep", "3600"]
  - name: looker
    image: `+testImage+`
    command: ["sh", "-c", "for i in $(seq 100); do ps | grep -q '[s]leep 3600' && ps -o comm | grep -q '^staticpod' && break; sleep 0.1; done; ps -o pid,comm > /dev/termination-log"]
`)
	cs := r.mustRunPod(t, pod)
	got := r.awaitState(t, cs["looker"].ID, runner.StateExited)
	if !strings.Contains(got.Message, "sleep") || !strings.Contains(got.Message, "staticpod") {
		t.Errorf("with shareProcessNamespace the container sees %q; want the other container's sleep and the sandbox process", got.Message)
	}
	lines := strings.Split(strings.TrimSpace(got.Message), "\n")
	if len(lines) < 2 || !strings.HasPrefix(strings.TrimSpace(lines[1]), "1 ") {
		t.Errorf("the sandbox should be PID 1 of the shared namespace:\n%s", got.Message)
	}
}

func TestSandboxExitsOnSIGTERM(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: sb}\nspec:\n  shareProcessNamespace: true\n  containers:\n  - {name: c, image: "+testImage+", command: [\"true\"]}\n")
	sb, err := r.startSandbox(pod, 0, manifests.Objects{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mustRemove(t, sb.ID) })
	running := r.awaitState(t, sb.ID, runner.StateRunning)
	time.Sleep(200 * time.Millisecond) // let the Go runtime start: see internal/pause
	if running.Kind != runner.KindSandbox || running.PID == 0 {
		t.Fatalf("sandbox = %+v", running)
	}
	start := time.Now()
	if err := r.StopContainer(r.ctx, sb.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	got := r.awaitState(t, sb.ID, runner.StateExited)
	if got.ExitCode != 0 || time.Since(start) > 30*time.Second {
		t.Errorf("sandbox exited %d after %v; want 0 at once on SIGTERM", got.ExitCode, time.Since(start))
	}
}

func TestSandboxReapsZombies(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: zombies}
spec:
  shareProcessNamespace: true
  containers:
  - name: parent
    image: `+testImage+`
    command: ["sh", "-c", "for i in 1 2 3 4 5; do (sleep 0.1 &) ; done; sleep 1; ps -o stat,comm | grep -c '^Z' > /dev/termination-log; true"]
`)
	cs := r.mustRunPod(t, pod)
	got := r.awaitState(t, cs["parent"].ID, runner.StateExited)
	if strings.TrimSpace(got.Message) != "0" {
		t.Errorf("%s zombies left; the sandbox (PID 1) should reap the orphans it inherits", strings.TrimSpace(got.Message))
	}
}

// shimsOf returns the PIDs of the shims of the containerd at address serving
// namespace ns.
func shimsOf(address, ns string) []int {
	var pids []int
	for _, s := range shims.Find("/proc", address, ns) {
		pids = append(pids, s.PID)
	}
	return pids
}

// shimOf returns the PID of the one shim serving the test's namespace.
func (r *testRuntime) shimOf(t *testing.T) int {
	t.Helper()
	shims := shimsOf(r.cfg.Address, r.cfg.Namespace)
	if len(shims) != 1 {
		t.Fatalf("shims of namespace %s: %v, want one", r.cfg.Namespace, shims)
	}
	return shims[0]
}

// A pod's sandbox process scores as the kubelet's does (-998), or as staticpod itself
// where lowering a score is not allowed: of the pod it is the last the kernel should
// kill.
func TestSandboxOOMScore(t *testing.T) {
	r := newTestRuntime(t)
	own, err := spec.OwnOOMScoreAdj()
	if err != nil {
		t.Fatal(err)
	}
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: oom}\nspec:\n  shareProcessNamespace: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	sb, err := r.startSandbox(pod, 0, manifests.Objects{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mustRemove(t, sb.ID) })
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", sb.PID))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(data)), strconv.Itoa(max(spec.SandboxOOMScoreAdj, own)); got != want {
		t.Errorf("the sandbox's oom_score_adj = %s, want %s (staticpod's own: %d)", got, want, own)
	}
}

// A Runtime writes nothing until it needs to: one made to exec in a container or to
// look at the namespace leaves the root dir as it found it. A pod's first sandbox pins
// its namespaces; the first sandbox process installs the sandbox root.
func TestNewWritesNothing(t *testing.T) {
	r := newTestRuntime(t)
	if entries, err := os.ReadDir(r.cfg.RootDir); err != nil || len(entries) != 0 {
		t.Fatalf("root dir after New: %v (%v), want it empty", entries, err)
	}
	for _, share := range []string{"false", "true"} {
		pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: lazy-"+share+"}\nspec:\n  shareProcessNamespace: "+share+"\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
		sb, err := r.startSandbox(pod, 0, manifests.Objects{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.mustRemove(t, sb.ID) })
		_, err = os.Stat(filepath.Join(r.cfg.RootDir, sandboxDir, "rootfs", sandboxBinary))
		if installed := err == nil; installed != (share == "true") {
			t.Errorf("after the first sandbox with shareProcessNamespace %s: sandbox root installed = %v", share, installed)
		}
	}
}

// A pod's containers and its sandbox share one shim: restarting a container, exec,
// and a container killed leave it be; it goes with the pod's last task. (A pod on the
// host network, which has no sandbox, keeps a shim per container: see shimGroup.)
func TestPodHasOneShim(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: grouped}
spec:
  containers:
  - {name: a, image: `+testImage+`, command: [sleep, "3600"]}
  - {name: b, image: `+testImage+`, command: [sleep, "3600"]}
`)
	cs := r.mustRunPod(t, pod)
	r.awaitState(t, cs["a"].ID, runner.StateRunning)
	b := r.awaitState(t, cs["b"].ID, runner.StateRunning)
	shim := r.shimOf(t) // the sandbox and both containers

	// A new attempt of a container starts no shim.
	if err := r.StopContainer(r.ctx, cs["a"].ID, 0); err != nil {
		t.Fatal(err)
	}
	again, sb := r.startAttempt(t, pod, &pod.Spec.Containers[0], 1)
	if got := r.shimOf(t); got != shim {
		t.Errorf("after a restart the pod's shim is %d, want %d still", got, shim)
	}

	// exec goes through the pod's shim.
	var out strings.Builder
	if code, err := r.Exec(r.ctx, b.ID, runner.ExecRequest{Command: []string{"echo", "grouped"}, Stdout: &out}); err != nil || code != 0 || out.String() != "grouped\n" {
		t.Errorf("exec in a grouped container: %d %v %q", code, err, out.String())
	}

	// A container killed is reported exited; the shim serves the others on.
	if err := syscall.Kill(int(b.PID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := r.awaitState(t, b.ID, runner.StateExited); got.ExitCode != 137 {
		t.Errorf("killed container: exit %d, want 137", got.ExitCode)
	}
	if got := r.shimOf(t); got != shim {
		t.Errorf("after a container was killed the pod's shim is %d, want %d still", got, shim)
	}

	// The shim goes with the pod's last task.
	for _, id := range []string{cs["a"].ID, b.ID, again.ID, sb.ID} {
		r.mustRemove(t, id)
	}
	testenv.Await(t, "the pod's shim to exit with its last task", 10*time.Second, func() bool {
		return syscall.Kill(shim, 0) != nil
	})
}

// When a pod's shim dies, every container it served is reported exited (255, Unknown)
// and its processes are killed, so that the restarts do not run beside them.
func TestLostGroupShim(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: lostgroup}\nspec:\n  containers:\n"+
		"  - {name: a, image: "+testImage+", command: [sleep, \"3600\"]}\n  - {name: b, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	cs := r.mustRunPod(t, pod)
	var pids []uint32
	for _, name := range []string{"a", "b"} {
		c := r.awaitState(t, cs[name].ID, runner.StateRunning)
		pids = append(pids, c.PID)
		t.Cleanup(func() { syscall.Kill(int(c.PID), syscall.SIGKILL) })
	}
	if err := syscall.Kill(r.shimOf(t), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if got := r.awaitState(t, cs[name].ID, runner.StateExited); got.ExitCode != 255 || got.Reason != "Unknown" {
			t.Errorf("%s after its shim died: exit %d %q, want 255 Unknown", name, got.ExitCode, got.Reason)
		}
	}
	for _, pid := range pids {
		testenv.Await(t, fmt.Sprintf("process %d gone after its shim died", pid), 10*time.Second, func() bool {
			return !shims.Alive(int(pid))
		})
	}
}

// startAttempt creates and starts attempt of container c in pod's running sandbox and
// waits until it runs; it returns the container and the sandbox.
func (r *testRuntime) startAttempt(t *testing.T, pod *corev1.Pod, c *corev1.Container, attempt int) (runner.Container, runner.Container) {
	t.Helper()
	img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: c.Image, Policy: c.ImagePullPolicy})
	if err != nil {
		t.Fatal(err)
	}
	sb := r.sandboxOf(t, pod)
	created, err := r.create(runner.CreateRequest{Pod: pod, Container: c, Attempt: attempt, Hash: manifests.ContainerHash(c), Sandbox: &sb, Image: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mustRemove(t, created.ID) })
	if err := r.StartContainer(r.ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	return r.awaitState(t, created.ID, runner.StateRunning), sb
}

// sandboxOf returns the running sandbox of pod, from a relist.
func (r *testRuntime) sandboxOf(t *testing.T, pod *corev1.Pod) runner.Container {
	t.Helper()
	all, err := r.relist(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.Kind == runner.KindSandbox && c.PodUID == pod.UID && c.State == runner.StateRunning {
			return c
		}
	}
	t.Fatalf("no running sandbox for %s", pod.Name)
	return runner.Container{}
}

func TestHostPIDAndIPC(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: hostns}
spec:
  hostPID: true
  hostIPC: true
  containers:
  - name: c
    image: `+testImage+`
    command: ["sh", "-c", "for ns in pid ipc net; do readlink /proc/self/ns/$ns; done > /dev/termination-log"]
`)
	cs := r.mustRunPod(t, pod)
	got := strings.Fields(r.awaitState(t, cs["c"].ID, runner.StateExited).Message)
	var host []string
	for _, ns := range []string{"pid", "ipc", "net"} {
		link, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			t.Fatal(err)
		}
		host = append(host, link)
	}
	if len(got) != 3 || got[0] != host[0] || got[1] != host[1] {
		t.Errorf("namespaces pid, ipc = %v, want the host's %v", got, host[:2])
	}
	if len(got) == 3 && got[2] == host[2] {
		t.Errorf("network namespace is the host's (%s); without hostNetwork the pod has its own", got[2])
	}
}

// A sandbox or a container asked for without what PreparePod resolved of its pod
// fails, saying so, and makes nothing: it never guesses the pod's directory or cgroup.
func TestCreationWithoutPreparationFailsAndMakesNothing(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: unprepared}\nspec:\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	if _, err := r.StartSandbox(r.ctx, pod, runner.PodConfig{}, 0); !errors.Is(err, errNotPrepared) {
		t.Errorf("StartSandbox without a PodConfig: %v, want %v", err, errNotPrepared)
	}
	c := &pod.Spec.Containers[0]
	img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: c.Image, Policy: c.ImagePullPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateContainer(r.ctx, runner.CreateRequest{Pod: pod, Container: c, Image: img}); !errors.Is(err, errNotPrepared) {
		t.Errorf("CreateContainer without a PodConfig: %v, want %v", err, errNotPrepared)
	}
	for _, got := range r.listAll(t) {
		if got.PodUID == pod.UID {
			t.Errorf("%s %s was made", got.Kind, got.ID)
		}
	}
}
