package containerdrt

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"golang.org/x/sys/unix"

	"github.com/staticpod/staticpod/containerdrt/pins"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// A pod with its own network gets pinned namespaces and no sandbox process: its
// containers share the pinned network, IPC and UTS namespaces, the hostname is the
// pod's and loopback is up. Stopping the sandbox unpins them; removing it leaves
// nothing in the root dir or the mount table.
func TestPinnedSandbox(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: pinned}
spec:
  containers:
  - {name: a, image: `+testImage+`, command: [sleep, "3600"]}
  - {name: b, image: `+testImage+`, command: [sleep, "3600"]}
`)
	cs := r.mustRunPod(t, pod)
	sb := r.sandboxOf(t, pod)
	if sb.PID != 0 {
		t.Errorf("the sandbox of a pod that shares no PID namespace has process %d, want none", sb.PID)
	}
	dir := r.pinDir(sb.ID)
	for _, ns := range []string{"net", "ipc", "uts"} {
		pin := nsInode(t, filepath.Join(dir, ns))
		for _, name := range []string{"a", "b"} {
			c := r.awaitState(t, cs[name].ID, runner.StateRunning)
			if got := nsInode(t, fmt.Sprintf("/proc/%d/ns/%s", c.PID, ns)); got != pin {
				t.Errorf("container %s is in %s namespace %d, want the pinned %d", name, ns, got, pin)
			}
		}
	}
	for cmd, want := range map[string]string{"hostname": "pinned-node1", "cat /sys/class/net/lo/flags": "0x9"} {
		var out strings.Builder
		if code, err := r.Exec(r.ctx, cs["a"].ID, runner.ExecRequest{Command: strings.Fields(cmd), Stdout: &out}); err != nil || code != 0 {
			t.Fatalf("exec %s: %d %v", cmd, code, err)
		}
		if got := strings.TrimSpace(out.String()); got != want {
			t.Errorf("%s in the pod: %q, want %q", cmd, got, want)
		}
	}

	for _, name := range []string{"a", "b"} {
		if err := r.StopContainer(r.ctx, cs[name].ID, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.StopContainer(r.ctx, sb.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := r.awaitState(t, sb.ID, runner.StateExited); got.ExitCode != 0 {
		t.Errorf("stopped sandbox: exit %d, want 0", got.ExitCode)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("pins after the sandbox stopped: %v, want them gone", err)
	}
	assertNotMounted(t, dir)
}

// A sandbox whose pins are lost (a reboot; someone's umount) is reported exited, so
// that its pod starts over in a new one; removing it removes what is left.
func TestPinnedSandboxLost(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: lostpins}\nspec:\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	sb, err := r.startSandbox(pod, 0, manifests.Objects{})
	if err != nil {
		t.Fatal(err)
	}
	dir := r.pinDir(sb.ID)
	if got := r.awaitState(t, sb.ID, runner.StateRunning); got.PID != 0 {
		t.Fatalf("pinned sandbox with process %d", got.PID)
	}
	for _, ns := range []string{"net", "ipc", "uts"} {
		if err := unix.Unmount(filepath.Join(dir, ns), unix.MNT_DETACH); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.awaitState(t, sb.ID, runner.StateExited); got.ExitCode != lostTaskExitCode || got.Reason != "Unknown" {
		t.Errorf("sandbox whose pins are gone: exit %d %q, want %d Unknown", got.ExitCode, got.Reason, lostTaskExitCode)
	}
	r.mustRemove(t, sb.ID)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("pin directory after the sandbox was removed: %v, want it gone", err)
	}
}

// Pins that no sandbox leads to (a staticpod killed while removing one, containerd's
// records lost) are removed by the next repair.
func TestOrphanPinsAreRemoved(t *testing.T) {
	r := newTestRuntime(t)
	dir := r.pinDir("ghost_0_12345678")
	if err := pins.Pin(dir, pins.Spec{Namespaces: []pins.Namespace{pins.Net, pins.UTS, pins.IPC}, Hostname: "ghost"}); err != nil {
		t.Fatal(err)
	}
	if !pins.Held(dir, []string{"net", "uts", "ipc"}) {
		t.Fatal("pins.Pin left pins that hold nothing")
	}
	if _, err := r.relist(r.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("orphan pins after List: %v, want them gone", err)
	}
	assertNotMounted(t, dir)
}

// Restarting the only container of a pod starts no shim: the exited attempt's task is
// kept, stopped, until the next attempt runs, then deleted; the shim goes once the pod
// has no task left.
func TestRestartKeepsThePodShim(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: onlyone}\nspec:\n  containers:\n  - {name: c, image: "+testImage+", command: [sh, -c, \"exit 3\"]}\n")
	cs := r.mustRunPod(t, pod)
	if got := r.awaitState(t, cs["c"].ID, runner.StateExited); got.ExitCode != 3 || got.Reason != "Error" {
		t.Fatalf("first attempt: exit %d %q, want 3 Error", got.ExitCode, got.Reason)
	}
	shim := r.shimOf(t)
	if !r.hasTask(t, cs["c"].ID) {
		t.Fatal("the exited only container of a pod lost its task: its shim exits")
	}

	c := &pod.Spec.Containers[0]
	c.Command = []string{"sleep", "3600"}
	again, sb := r.startAttempt(t, pod, c, 1)
	if got := r.shimOf(t); got != shim {
		t.Errorf("after a restart the pod's shim is %d, want %d still", got, shim)
	}
	if _, err := r.relist(r.ctx); err != nil {
		t.Fatal(err)
	}
	if r.hasTask(t, cs["c"].ID) {
		t.Error("the first attempt's task is kept although the second attempt runs")
	}
	if got, _ := r.find(t, cs["c"].ID); got.State != runner.StateExited || got.ExitCode != 3 {
		t.Errorf("first attempt after its task went: %s exit %d, want exited 3", got.State, got.ExitCode)
	}

	// A stopped pod keeps no task: its sandbox's end releases the last one.
	if err := r.StopContainer(r.ctx, again.ID, 0); err != nil {
		t.Fatal(err)
	}
	r.awaitState(t, again.ID, runner.StateExited)
	if err := r.StopContainer(r.ctx, sb.ID, 0); err != nil {
		t.Fatal(err)
	}
	testenv.Await(t, "the pod's shim to exit once its sandbox stopped", 10*time.Second, func() bool {
		if _, err := r.relist(r.ctx); err != nil {
			t.Fatal(err)
		}
		return syscall.Kill(shim, 0) != nil
	})
}

// hasTask reports whether containerd holds a task for container id.
func (r *testRuntime) hasTask(t *testing.T, id string) bool {
	t.Helper()
	ctx, cancel := r.call(context.Background())
	defer cancel()
	_, err := r.client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: id})
	if err != nil && !isNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// nsInode is the inode of a namespace file: the namespace's identity.
func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// assertNotMounted fails if anything is mounted at or below dir in the mount namespace
// of any process: a pin copied into another mount namespace would keep its namespace.
func assertNotMounted(t *testing.T, dir string) {
	t.Helper()
	infos, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, path := range infos {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the process is gone
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, " "+dir) {
				cmdline, _ := os.ReadFile(strings.Replace(path, "mountinfo", "cmdline", 1))
				t.Errorf("%s (%s) still has a mount under %s: %s", path, strings.ReplaceAll(string(cmdline), "\x00", " "), dir, line)
			}
		}
	}
}

// A reap interrupted after the exit was recorded and before the task was deleted is
// finished by the next repair: the task goes, the exit is reported (not unknown).
func TestInterruptedReapIsFinished(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: halfreaped}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sh, -c, \"exit 2\"]}\n")
	cs := r.mustRunPod(t, pod)
	ctx, cancel := r.call(context.Background())
	defer cancel()
	c, err := r.client.LoadContainer(ctx, cs["c"].ID)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	exited, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-exited
	if _, err := r.setLabels(ctx, c.ID(), map[string]string{labelExitCode: "2", labelFinishedAt: time.Now().UTC().Format(time.RFC3339Nano), labelReason: "Error"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.find(t, cs["c"].ID); got.State != runner.StateExited || got.ExitCode != 2 {
		t.Errorf("after an interrupted reap: %s exit %d, want exited 2", got.State, got.ExitCode)
	}
	r.repairs.asideWG.Wait() // the task is deleted beside the relist
	if r.hasTask(t, cs["c"].ID) {
		t.Error("the task of an interrupted reap is left")
	}
}

// Starting a pod costs containerd no more than it must: the pinned sandbox is one
// write of a record (no lease around it: it references nothing to collect), and no
// call reads the namespace's labels for a default snapshotter, which New resolved.
func TestPodStartAsksContainerdOnlyWhatItMust(t *testing.T) {
	r := newTestRuntime(t)
	// As once the exit watch's first event came: the records kept are trusted from the
	// next list on.
	r.recordsChanged(recordEvent{id: "before-the-test", op: "delete"})
	if _, err := r.relist(r.ctx); err != nil {
		t.Fatal(err)
	}
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: calls}\nspec:\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	cfg, err := r.PreparePod(r.ctx, pod, manifests.Objects{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.RemovePodData(context.WithoutCancel(r.ctx), pod.UID); err != nil {
			t.Errorf("RemovePodData: %v", err)
		}
	})
	before := r.Calls()
	sb, err := r.StartSandbox(r.ctx, pod, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mustRemove(t, sb.ID) })
	if sb.State != runner.StateRunning || sb.PID != 0 {
		t.Fatalf("pinned sandbox %+v, want running without a process", sb)
	}
	sandbox := callsSince(before, r.Calls())
	const (
		create     = "/containerd.services.containers.v1.Containers/Create"
		namespaces = "/containerd.services.namespaces.v1.Namespaces/Get"
	)
	if want := map[string]uint64{create: 1}; !maps.Equal(sandbox, want) {
		t.Errorf("a pinned sandbox made the calls %v, want %v: a record, no lease, no read of the namespace's labels", sandbox, want)
	}
	before = r.Calls()
	c := &pod.Spec.Containers[0]
	img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: c.Image, Policy: c.ImagePullPolicy})
	if err != nil {
		t.Fatal(err)
	}
	created, err := r.create(runner.CreateRequest{Pod: pod, Container: c, Hash: manifests.ContainerHash(c), Sandbox: &sb, Image: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mustRemove(t, created.ID) })
	if n := callsSince(before, r.Calls())[namespaces]; n != 0 {
		t.Errorf("creating a container read the namespace's labels %d times, want 0", n)
	}
	r.images.Wait() // the image's user files are copied, in the background
	before = r.Calls()
	if err := r.StartContainer(r.ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	// The mounts of its snapshot, its task made and started, its start time recorded:
	// its record is the one its creation kept.
	want := map[string]uint64{
		"/containerd.services.snapshots.v1.Snapshots/Mounts":   1,
		"/containerd.services.tasks.v1.Tasks/Create":           1,
		"/containerd.services.tasks.v1.Tasks/Start":            1,
		"/containerd.services.containers.v1.Containers/Update": 1,
	}
	if got := callsSince(before, r.Calls()); !maps.Equal(got, want) {
		t.Errorf("StartContainer made the calls %v, want %v", got, want)
	}
	// The next container of the image needs nothing of it but its snapshot.
	before = r.Calls()
	again, err := r.CreateContainer(r.ctx, runner.CreateRequest{Pod: pod, Config: cfg, Container: c, Hash: manifests.ContainerHash(c), Sandbox: &sb, Image: img, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mustRemove(t, again.ID) })
	for method, n := range callsSince(before, r.Calls()) {
		if strings.Contains(method, ".images.") || strings.Contains(method, ".content.") || strings.Contains(method, ".introspection.") {
			t.Errorf("a second container of image %s called %s %d times, want none", img.Ref, method, n)
		}
		// Its user and groups are looked up in the copy of the image's user files the
		// first one made, not in a mount of its own snapshot.
		if strings.HasSuffix(method, "Snapshots/Mounts") || strings.HasSuffix(method, "Snapshots/View") {
			t.Errorf("a second container of image %s called %s %d times, want none", img.Ref, method, n)
		}
	}
	// Making sure of an image read before asks for its record and its layers' snapshot.
	before = r.Calls()
	if _, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: c.Image, Policy: c.ImagePullPolicy}); err != nil {
		t.Fatal(err)
	}
	want = map[string]uint64{"/containerd.services.images.v1.Images/Get": 1, "/containerd.services.snapshots.v1.Snapshots/Stat": 1}
	if got := callsSince(before, r.Calls()); !maps.Equal(got, want) {
		t.Errorf("EnsureImage of image %s read before made the calls %v, want %v", img.Ref, got, want)
	}
}

// callsSince is the calls made between two Calls.
func callsSince(before, now map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}
