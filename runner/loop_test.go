package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
)

// harness drives a Runner's pieces synchronously: the test relists and syncs workers
// itself, with a clock it moves by hand.
type harness struct {
	t   *testing.T
	f   *fakeRuntime
	r   *Runner
	ctx context.Context
	dir string // the runner's ResultsDir, which a restarted runner reads again

	mu  sync.Mutex // guards now, read by workers in goroutines of some tests
	now time.Time
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, now: t0, ctx: context.Background(), dir: t.TempDir()}
	h.f = newFakeRuntime(h.clock)
	r, err := New(Options{Runtime: h.f, Now: h.clock, HostIP: "10.0.0.1", ResultsDir: h.dir})
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	return h
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *harness) tick(d time.Duration) {
	h.mu.Lock()
	h.now = h.now.Add(d)
	h.mu.Unlock()
}

// sync relists and runs one sync of w, as a PLEG event would.
func (h *harness) sync(w *worker) bool {
	h.t.Helper()
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		h.t.Fatalf("Relist: %v", err)
	}
	return w.syncOnce(h.ctx)
}

// pod loads a manifest as a source would deliver it.
func testPod(t *testing.T, name, command string, policy corev1.RestartPolicy) *corev1.Pod {
	t.Helper()
	manifest := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  restartPolicy: %s\n  containers:\n  - {name: c, image: busybox:1.36, command: [sh, -c, %q]}\n", name, policy, command)
	res := manifests.Load([]byte(manifest), manifests.Options{NodeName: "n", Source: manifests.Source{Kind: manifests.SourceFile, Location: name + ".yaml"}})
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	return res.Pods[0]
}

func TestWorkerStartsPodAndReportsStatus(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "web", "httpd -f", corev1.RestartPolicyAlways)
	h.r.pub.seen[pod.UID] = t0
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	got := h.f.byName(pod.UID)
	if got["c/0"].State != StateRunning || got["web-n/0"].Kind != KindSandbox {
		t.Fatalf("after one sync the runtime holds %v, want a sandbox and container c running", got)
	}
	h.sync(w)
	pods := h.r.Pods()
	if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning || !pods[0].Status.ContainerStatuses[0].Ready {
		t.Fatalf("status = %+v, want Running and ready", pods[0].Status)
	}
	if n := h.f.count("CreateContainer"); n != 1 {
		t.Errorf("CreateContainer called %d times, want 1: a synced pod is left alone", n)
	}
	var reasons []string
	for _, e := range h.r.events.Pod(pod.UID) {
		reasons = append(reasons, e.Reason)
	}
	if strings.Join(reasons, " ") != "Pulled Created Started" {
		t.Errorf("events %v, want Pulled Created Started", reasons)
	}
}

func TestAdoptionKeepsMatchingContainers(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "etcd", "etcd", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	h.f.put(Container{ID: "old", Kind: KindContainer, PodUID: pod.UID, Name: "c", Attempt: 3, Hash: manifests.ContainerHash(&pod.Spec.Containers[0]), State: StateRunning, PID: 42})
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	if n := h.f.count("CreateContainer") + h.f.count("StopContainer"); n != 0 {
		t.Fatalf("adopting a matching container made %d create/stop calls, want 0", n)
	}

	stale := testPod(t, "api", "apiserver", corev1.RestartPolicyAlways)
	stale.Spec.HostNetwork = true
	h.f.put(Container{ID: "stale", Kind: KindContainer, PodUID: stale.UID, Name: "c", Attempt: 2, Hash: "other", State: StateRunning, PID: 43})
	h.sync(newWorker(h.r.workerDeps(), stale.UID, stale))
	if c := h.f.byName(stale.UID)["c/3"]; c.State != StateRunning || h.f.byName(stale.UID)["c/2"].State != StateExited {
		t.Fatalf("a container whose spec hash differs was not replaced: %v", h.f.byName(stale.UID))
	}
}

func TestDeleteDuringCreate(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "job", "sleep 1", corev1.RestartPolicyAlways)
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	gate := make(chan struct{})
	h.f.gate["CreateContainer"] = gate
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	go func() { done <- w.syncOnce(h.ctx) }()
	testenv.Await(t, "CreateContainer to be called", 10*time.Second, func() bool { return h.f.count("CreateContainer") == 1 })
	w.terminate() // the manifest is deleted while the container is being created
	close(gate)
	if gone := <-done; gone {
		t.Fatal("worker finished before killing what it created")
	}
	for i := 0; i < 3 && !h.sync(w); i++ {
	}
	if len(h.f.byName(pod.UID)) != 0 || !h.f.removedPod[pod.UID] {
		t.Fatalf("after the kill the runtime holds %v (pod data removed: %v), want nothing", h.f.byName(pod.UID), h.f.removedPod[pod.UID])
	}
}

func TestKillDuringBackoff(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "crash", "exit 1", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	h.f.exit(string(pod.UID)+"-c-0", 1)
	h.sync(w) // restarted at once: the first restart has no back-off
	h.f.exit(string(pod.UID)+"-c-1", 1)
	h.sync(w) // now in back-off
	if _, ok := h.f.byName(pod.UID)["c/2"]; ok {
		t.Fatal("restarted during back-off")
	}
	if w.obs.Waiting["c"].Reason != ReasonCrashLoopBackOff {
		t.Fatalf("waiting reason = %q, want CrashLoopBackOff", w.obs.Waiting["c"].Reason)
	}
	w.terminate()
	gone := false
	for i := 0; i < 3 && !gone; i++ {
		gone = h.sync(w)
	}
	if !gone || len(h.f.byName(pod.UID)) != 0 {
		t.Fatalf("kill during back-off: gone=%v, runtime holds %v", gone, h.f.byName(pod.UID))
	}
	h.tick(time.Hour)
	if _, ok := h.f.byName(pod.UID)["c/2"]; ok {
		t.Fatal("a killed pod was restarted after its back-off")
	}
}

func TestEditWaitsForTheOldPod(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	old := testPod(t, "web", "v1", corev1.RestartPolicyAlways)
	edited := testPod(t, "web", "v2", corev1.RestartPolicyAlways)
	if old.UID == edited.UID {
		t.Fatal("an edit kept the UID")
	}
	if _, err := h.r.pleg.Relist(h.ctx); err != nil { // pods wait for the first relist
		t.Fatal(err)
	}
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{old}})
	h.sync(spawned[0]) // the old pod runs

	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{edited}}) // the file is edited
	// Its images are pulled first, also before a relist showed what the old pod started.
	if spawned[0].killed() {
		t.Fatal("the old pod was stopped before the edited pod's images were pulled")
	}
	takePrepull(t, l)
	if len(spawned) != 1 || !spawned[0].kill || l.pending[edited.Namespace+"/"+edited.Name] != edited {
		t.Fatalf("after the edit: %d workers, old killed %v, pending %v; want the new pod to wait", len(spawned), spawned[0].kill, l.pending)
	}
	for i := 0; i < 3 && !h.sync(spawned[0]); i++ {
		if n := len(h.f.byName(edited.UID)); n != 0 {
			t.Fatalf("the new pod has %d containers while the old one is still stopping", n)
		}
	}
	l.workerGone(h.ctx, old.UID)
	if len(spawned) != 2 || spawned[1].uid != edited.UID {
		t.Fatalf("after the old pod went, workers = %d; want the edited pod started", len(spawned))
	}
	h.sync(spawned[1])
	if c := h.f.byName(edited.UID)["c/0"]; c.State != StateRunning {
		t.Fatalf("edited pod's container is %v, want running", c.State)
	}
}

func TestOrphansWaitForTheirSource(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	h.f.put(Container{ID: "orphan", Kind: KindContainer, PodUID: "gone", Name: "c", State: StateRunning, Source: "file"})
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		t.Fatal(err)
	}
	l.housekeeping(h.ctx)
	if len(spawned) != 0 {
		t.Fatal("an orphan was killed before its source delivered a snapshot: a restart must adopt, not kill")
	}
	l.apply(h.ctx, manifests.Update{Source: "http"})
	l.housekeeping(h.ctx)
	if len(spawned) != 0 {
		t.Fatal("another source's snapshot made a file pod an orphan")
	}
	l.apply(h.ctx, manifests.Update{Source: "file"})
	l.housekeeping(h.ctx)
	if len(spawned) != 1 {
		t.Fatalf("after the file source's snapshot %d orphan workers, want 1", len(spawned))
	}
	for i := 0; i < 3 && !h.sync(spawned[0]); i++ {
	}
	if len(h.f.byName("gone")) != 0 {
		t.Fatalf("orphan not removed: %v", h.f.byName("gone"))
	}
}

// An orphan (its pod's spec is gone: staticpod restarted after its manifest went) is
// stopped as its pod asked, from what the runtime recorded: its grace period and its
// preStop hook. One whose stop an earlier staticpod began gets what is left of that
// grace period, and its hook, which ran then, does not run again.
func TestOrphansStopAsTheirPodAsked(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	grace := 10 * time.Second
	hook := &corev1.Container{Name: "c", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}}}
	h.f.put(Container{ID: "fresh", Kind: KindContainer, PodUID: "gone", Name: "c", State: StateRunning, Source: "file", PodGrace: &grace, PreStop: hook})
	h.f.put(Container{ID: "halfway", Kind: KindContainer, PodUID: "going", Name: "c", State: StateRunning, Source: "file", PodGrace: &grace, PreStop: hook,
		StopDeadline: h.clock().Add(4 * time.Second)})
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		t.Fatal(err)
	}
	l.apply(h.ctx, manifests.Update{Source: "file"})
	l.housekeeping(h.ctx)
	if len(spawned) != 2 {
		t.Fatalf("%d orphan workers, want 2", len(spawned))
	}
	for _, w := range spawned {
		h.sync(w)
	}
	if want := []string{"fresh: drain"}; !slices.Equal(h.f.execs, want) {
		t.Errorf("hooks run: %q, want %q", h.f.execs, want)
	}
	if got := h.f.graces["fresh"]; got > grace || got < grace-time.Second { // less the hook's time
		t.Errorf("an orphan stopped with grace %v, want its pod's %v", got, grace)
	}
	if got := h.f.graces["halfway"]; got != 4*time.Second {
		t.Errorf("an orphan whose stop was under way stopped with grace %v, want the 4s left", got)
	}
	if n := strings.Count(strings.Join(h.f.calls, " "), "BeginStop"); n != 1 {
		t.Errorf("BeginStop called %d times, want once (for the stop that began now)", n)
	}
}

func TestImagePullFailureBacksOff(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "pull", "true", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	h.f.fail["EnsureImage"] = fmt.Errorf("%w: registry said no", ErrImagePull)
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	if r := w.obs.Waiting["c"].Reason; r != ReasonErrImagePull {
		t.Fatalf("waiting reason = %q, want ErrImagePull", r)
	}
	h.sync(w)
	if r := w.obs.Waiting["c"].Reason; r != ReasonImagePullBackOff || h.f.count("EnsureImage") != 1 {
		t.Fatalf("waiting reason = %q after %d pulls, want ImagePullBackOff without a second pull", r, h.f.count("EnsureImage"))
	}
	delete(h.f.fail, "EnsureImage")
	h.tick(pullBackoffInitial)
	h.sync(w)
	if c := h.f.byName(pod.UID)["c/0"]; c.State != StateRunning {
		t.Fatalf("after the back-off the container is %v, want running", c.State)
	}
}

// An image that arrives without a pull (an archive imported) ends the pull back-off of
// the pods waiting for it, and only of those.
func TestArrivedImageEndsThePullBackoff(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	l.spawn = func(context.Context, *worker) {}
	late := testPod(t, "late", "true", corev1.RestartPolicyAlways)
	other := testPod(t, "other", "true", corev1.RestartPolicyAlways)
	other.Spec.Containers[0].Image = "other:1"
	h.f.fail["EnsureImage"] = fmt.Errorf("%w: not present", ErrImageNeverPull)
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{late, other}})
	res, err := h.r.pleg.Relist(h.ctx)
	l.relisted(h.ctx, relistDone{res, err})
	if len(l.workers) != 2 {
		t.Fatalf("%d workers, want 2", len(l.workers))
	}
	for _, w := range l.workers {
		h.sync(w)
		if r := w.obs.Waiting["c"].Reason; r != ReasonErrImageNeverPull && r != ReasonErrImagePull {
			t.Fatalf("%s: waiting reason = %q, want the failed pull", w.uid, r)
		}
	}
	delete(h.f.fail, "EnsureImage")
	// What the loop does when Runner.ImagesArrived is called.
	for _, w := range l.workers {
		w.imagesArrived(func(image string) bool { return image == late.Spec.Containers[0].Image })
	}
	for _, w := range l.workers {
		h.sync(w) // no time has passed: the back-off of 10 s is not over
	}
	if c := h.f.byName(late.UID)["c/0"]; c.State != StateRunning {
		t.Errorf("the pod whose image arrived: container %v, want running at once", c.State)
	}
	if c, ok := h.f.byName(other.UID)["c/0"]; ok {
		t.Errorf("the pod waiting for another image started (%v): its back-off is not over", c.State)
	}
}

// Archives are imported while staticpod starts, before the loop runs: telling the
// runner of their images must not wait for it, and nothing told is lost.
func TestImagesArrivedNeverBlocks(t *testing.T) {
	h := newHarness(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, name := range []string{"a:1", "b:1", "c:1"} {
			h.r.ImagesArrived(func(image string) bool { return image == name })
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ImagesArrived blocked with no loop running")
	}
	provides := <-h.r.arrived
	for _, image := range []string{"a:1", "b:1", "c:1"} {
		if !provides(image) {
			t.Errorf("the arrival of %s was lost", image)
		}
	}
	if provides("d:1") {
		t.Error("an image that did not arrive is said to have")
	}
}

// The first relist comes at once, not a relist period after the start: pods wait for
// it to know what runs already.
func TestFirstRelistIsAtOnce(t *testing.T) {
	f := newFakeRuntime(time.Now)
	r, err := New(Options{Runtime: f, RelistPeriod: time.Hour, HostIP: "10.0.0.1", ResultsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	pod := testPod(t, "first", "sleep 1", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	if err := r.Update(ctx, manifests.Update{Source: manifests.SourceFile, Pods: []*corev1.Pod{pod}}); err != nil {
		t.Fatal(err)
	}
	testenv.Await(t, "the pod running with a relist period of an hour", 10*time.Second, func() bool {
		return f.byName(pod.UID)["c/0"].State == StateRunning
	})
}

// Relists counts the relists the loop took, one a period: what tests await to know
// that the runner had its chance to act.
func TestRelistsCountsEveryRelist(t *testing.T) {
	f := newFakeRuntime(time.Now)
	r, err := New(Options{Runtime: f, RelistPeriod: 10 * time.Millisecond, ResultsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Relists(); n != 0 {
		t.Fatalf("Relists() = %d before Run, want 0", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testenv.Await(t, "5 relists of a 10ms period", 10*time.Second, func() bool { return r.Relists() >= 5 })
	f.mu.Lock()
	f.fail["List"] = errors.New("containerd restarting")
	f.mu.Unlock()
	from := r.Relists()
	testenv.Await(t, "failed relists counted too", 10*time.Second, func() bool { return r.Relists() >= from+2 })
}

func TestPanicInSyncIsRecovered(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "boom", "true", corev1.RestartPolicyAlways)
	h.f.panicOn = "StartSandbox"
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	if gone := h.sync(w); gone {
		t.Fatal("a panicking sync reported the pod gone")
	}
	events := h.r.events.Pod(pod.UID)
	if len(events) == 0 || events[len(events)-1].Reason != "FailedSync" {
		t.Fatalf("events = %+v, want a FailedSync", events)
	}
}

func TestRelistErrorKeepsPods(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "keep", "sleep 100", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	h.f.fail["List"] = errors.New("containerd restarting")
	if _, err := h.r.pleg.Relist(h.ctx); err == nil {
		t.Fatal("Relist hid the runtime's error")
	}
	w.syncOnce(h.ctx)
	if n := h.f.count("CreateContainer"); n != 1 {
		t.Fatalf("a failed relist led to %d creates, want the pod left as it was", n)
	}
}

// A sandbox that cannot be made (its pod network failed, say) is tried again after a
// back-off, and meanwhile the pod's containers wait with its message.
func TestFailedSandboxBacksOff(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "sb", "true", corev1.RestartPolicyAlways)
	h.r.pub.seen[pod.UID] = t0
	h.f.fail["StartSandbox"] = errors.New(`plugin type="bridge" failed (add): no IP addresses available in range set`)
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	h.sync(w)
	h.sync(w)
	if n := h.f.count("StartSandbox"); n != 1 {
		t.Fatalf("StartSandbox called %d times in a row, want 1 then a back-off", n)
	}
	waiting := h.r.Pods()[0].Status.ContainerStatuses[0].State.Waiting
	if waiting == nil || waiting.Reason != ReasonCreatePodSandboxError || !strings.Contains(waiting.Message, "no IP addresses available") {
		t.Errorf("container state while the sandbox fails: %+v, want waiting %s with the error", waiting, ReasonCreatePodSandboxError)
	}
	delete(h.f.fail, "StartSandbox")
	h.tick(pullBackoffInitial)
	h.sync(w)
	if n := h.f.count("StartSandbox"); n != 2 || h.f.byName(pod.UID)["c/0"].State != StateRunning {
		t.Fatalf("after the back-off: %d sandbox starts, containers %v", n, h.f.byName(pod.UID))
	}
	h.sync(w)
	if st := h.r.Pods()[0].Status.ContainerStatuses[0].State; st.Running == nil {
		t.Errorf("container state once the sandbox was made: %+v, want running", st)
	}
}

// A sandbox without a pod network says why in the pod's events, once.
func TestNoPodNetworkIsTold(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "lo", "true", corev1.RestartPolicyAlways)
	h.f.networkNote = "no CNI configuration in /etc/cni/net.d: the pod has loopback only"
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	h.sync(w)
	h.sync(w)
	var told []string
	for _, e := range h.r.events.Pod(pod.UID) {
		if e.Reason == "NoPodNetwork" {
			told = append(told, e.Message)
		}
	}
	if len(told) != 1 || told[0] != h.f.networkNote {
		t.Errorf("NoPodNetwork events %q, want the runtime's note once", told)
	}
}

func TestFailedStartBacksOffAndIsRemoved(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "st", "true", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	h.f.fail["StartContainer"] = errors.New("exec format error")
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	h.sync(w)
	if n := h.f.count("CreateContainer"); n != 1 || len(h.f.byName(pod.UID)) != 0 {
		t.Fatalf("%d creates and containers %v; want one try, removed, then a back-off", n, h.f.byName(pod.UID))
	}
	if r := w.obs.Waiting["c"].Reason; r != ReasonRunContainerError {
		t.Errorf("waiting reason %q, want RunContainerError", r)
	}
}

func TestPodsWaitForTheFirstRelist(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	pod := testPod(t, "early", "sleep 1", corev1.RestartPolicyAlways)
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{pod}})
	if len(spawned) != 0 {
		t.Fatal("a pod started before anything was known of what runs")
	}
	res, err := h.r.pleg.Relist(h.ctx)
	l.relisted(h.ctx, relistDone{res, err})
	if len(spawned) != 1 || spawned[0].uid != pod.UID {
		t.Fatalf("after the first relist %d workers, want the pod's", len(spawned))
	}
}

func TestReAddedWhileKilledComesBack(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	h.r.pleg.Relist(h.ctx)
	pod := testPod(t, "etcd", "etcd", corev1.RestartPolicyAlways)
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{pod}})
	h.sync(spawned[0])
	l.apply(h.ctx, manifests.Update{Source: "file"})                           // mv etcd.yaml /tmp
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{pod}}) // mv /tmp/etcd.yaml .
	for i := 0; i < 3 && !h.sync(spawned[0]); i++ {
	}
	l.workerGone(h.ctx, pod.UID)
	// It comes back after the relist its removal asks for, which no longer shows the
	// removed containers (see TestPodWantedAgainRightAfterRemovalStartsAfresh).
	res, err := h.r.pleg.Relist(h.ctx)
	l.relisted(h.ctx, relistDone{res, err})
	if len(spawned) != 2 || spawned[1].uid != pod.UID || spawned[1].killed() {
		t.Fatalf("a pod wanted again while it was being removed did not come back (%d workers)", len(spawned))
	}
}

// editedWhileDown is a staticpod started after the manifest of pod "api" was edited
// while it was down: the old instance's container, in state, and the edited pod
// applied. It returns the workers spawned, as they are.
func editedWhileDown(t *testing.T, state State) (h *harness, l *loop, spawned *[]*worker, old, edited *corev1.Pod) {
	h = newHarness(t)
	l = newLoop(h.r, &sync.WaitGroup{})
	spawned = new([]*worker)
	l.spawn = func(_ context.Context, w *worker) { *spawned = append(*spawned, w) }
	old = testPod(t, "api", "v1", corev1.RestartPolicyAlways)
	edited = testPod(t, "api", "v2", corev1.RestartPolicyAlways)
	h.f.put(Container{ID: "old", Kind: KindContainer, PodUID: old.UID, PodName: old.Name, PodNamespace: old.Namespace, Name: "c", State: state, Source: "file"})
	h.r.pleg.Relist(h.ctx)
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{edited}})
	if state == StateRunning { // its images are pulled first (TestEditedWhileDownPullsBeforeStoppingTheOldInstance)
		takePrepull(t, l)
	}
	return h, l, spawned, old, edited
}

func TestEditedWhileDownStopsTheOldInstanceFirst(t *testing.T) {
	h, l, spawned, old, edited := editedWhileDown(t, StateRunning)
	if len(*spawned) != 1 || (*spawned)[0].uid != old.UID || !(*spawned)[0].killed() {
		t.Fatalf("workers %d; want the old instance's killer first and the edited pod waiting", len(*spawned))
	}
	for i := 0; i < 3 && !h.sync((*spawned)[0]); i++ {
		if len(h.f.byName(edited.UID)) != 0 {
			t.Fatal("the edited pod started while the old instance still ran")
		}
	}
	l.workerGone(h.ctx, old.UID)
	if len(*spawned) != 2 || (*spawned)[1].uid != edited.UID {
		t.Fatalf("the edited pod did not start after the old instance went (%d workers)", len(*spawned))
	}
}

// An old instance with nothing to stop (a container created, never started: what a
// staticpod killed in the middle of a start leaves) is removed in one sync, so the
// cache still shows its container when the worker is gone: that is no instance to stop
// again (each round logged "stopping the previous instance" and "pod removed" until a
// relist).
func TestEditedWhileDownStopsTheOldInstanceOnce(t *testing.T) {
	h, l, spawned, old, edited := editedWhileDown(t, StateCreated)
	if !(*spawned)[0].syncOnce(h.ctx) { // no relist: the cache keeps showing it
		t.Fatal("the old instance was not removed in one sync")
	}
	l.workerGone(h.ctx, old.UID)
	last := (*spawned)[len(*spawned)-1]
	if len(*spawned) != 2 || last.uid != edited.UID {
		t.Fatalf("after the old instance went: %d workers, the last for %s; want the edited pod's", len(*spawned), last.uid)
	}
}

// A container in back-off gets its worker an alarm for the instant the back-off ends,
// so that the restart does not wait for a relist.
func TestBackoffSetsAnAlarmForItsEnd(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "crash", "exit 1", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	defer w.stopAlarm()
	h.sync(w)
	h.f.exit(string(pod.UID)+"-c-0", 1)
	h.sync(w) // restarted at once: the first restart has no back-off
	if w.alarm != nil {
		t.Fatal("an alarm was set with no back-off running")
	}
	h.f.exit(string(pod.UID)+"-c-1", 1)
	h.tick(3 * time.Second) // the exit is seen 3 s late: 7 s of the 10 s are left
	before := time.Now()
	h.sync(w)
	if w.obs.Waiting["c"].Reason != ReasonCrashLoopBackOff {
		t.Fatalf("waiting reason = %q, want CrashLoopBackOff", w.obs.Waiting["c"].Reason)
	}
	if w.alarm == nil {
		t.Fatal("no alarm set for the end of the back-off")
	}
	if lo, hi := before.Add(7*time.Second), time.Now().Add(7*time.Second); w.alarmAt.Before(lo) || w.alarmAt.After(hi) {
		t.Fatalf("alarm at %v, want 7 s from the sync (%v..%v)", w.alarmAt, lo, hi)
	}
	w.stopAlarm()
	w.alarm.Reset(time.Millisecond) // the back-off's end, early: the alarm signals the worker
	select {
	case <-w.inbox:
	case <-time.After(5 * time.Second):
		t.Fatal("the alarm did not signal the worker")
	}
}

// A relist wakes the workers whose pods it saw change and those that asked for it;
// the others sleep until the periodic resync.
func TestRelistWakesOnlyTheWorkersItConcerns(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	l.spawn = func(context.Context, *worker) {}
	a := testPod(t, "a", "sleep 1d", corev1.RestartPolicyAlways)
	b := testPod(t, "b", "sleep 1d", corev1.RestartPolicyAlways)
	c := testPod(t, "c", "sleep 1d", corev1.RestartPolicyAlways)
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{a, b, c}})
	relist := func() {
		res, err := h.r.pleg.Relist(h.ctx)
		l.relisted(h.ctx, relistDone{res, err})
	}
	relist()
	for _, w := range l.workers {
		h.sync(w) // each starts its pod
	}
	relist()
	drain := func() map[string]bool {
		woken := map[string]bool{}
		for _, w := range l.workers {
			select {
			case <-w.inbox:
				woken[w.pod.Name] = true
			default:
			}
		}
		return woken
	}
	drain()
	h.f.exit(string(a.UID)+"-c-0", 1)
	h.r.asks.request(c.UID)
	relist()
	if got := drain(); !got["a-n"] || got["b-n"] || !got["c-n"] {
		t.Fatalf("woken %v, want a-n (its container exited) and c-n (it asked), not b-n", got)
	}
	relist()
	if got := drain(); len(got) != 0 {
		t.Fatalf("woken %v by a relist that saw nothing change, want none", got)
	}
	h.tick(resyncPeriod)
	relist()
	if got := drain(); len(got) != 3 {
		t.Fatalf("woken %v at the periodic resync, want all three", got)
	}
}

// runWithPod runs a runner over f, relisting every period, with pod from the file
// source, until the test ends.
func runWithPod(t *testing.T, f *fakeRuntime, period time.Duration, pod *corev1.Pod) *Runner {
	t.Helper()
	r, err := New(Options{Runtime: f, RelistPeriod: period, HostIP: "10.0.0.1", ResultsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := r.Update(ctx, manifests.Update{Source: manifests.SourceFile, Pods: []*corev1.Pod{pod}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// The loop has the runtime repair what each relist saw, and relists again when the
// repair changed something, before any worker acts on it: a container that a crash
// left unknown is restarted once the repair recorded its end, never raced by it.
func TestRepairFollowsEveryRelistAndPrecedesTheFirstSync(t *testing.T) {
	f := newFakeRuntime(time.Now)
	pod := testPod(t, "mended", "sleep 100", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	f.put(Container{ID: "lost", Kind: KindContainer, PodUID: pod.UID, PodName: pod.Name, PodNamespace: pod.Namespace, Name: "c",
		Source: manifests.SourceFile, Hash: manifests.ContainerHash(&pod.Spec.Containers[0]), State: StateUnknown,
		StartedAt: time.Now().Add(-time.Minute)}) // lost: started, its task gone
	repairs := 0
	f.repair = func() bool { // called with f.mu free
		repairs++
		if repairs > 1 {
			return false
		}
		return f.change("lost", func(c *Container) { c.State, c.ExitCode = StateExited, 255 }) == nil
	}
	r := runWithPod(t, f, 10*time.Millisecond, pod)
	testenv.Await(t, "the lost container's successor running and 5 relists", 10*time.Second, func() bool {
		return f.byName(pod.UID)["c/1"].State == StateRunning && r.Relists() >= 5
	})
	f.mu.Lock()
	calls := slices.Clone(f.calls)
	f.mu.Unlock()
	first := slices.IndexFunc(calls, func(op string) bool { return op != "List" && op != "Repair" })
	// The runtime is listed and repaired before the PLEG's first relist fills its cache
	// (a worker may start as soon as it is filled), and that relist is repaired too.
	if want := []string{"List", "Repair", "List", "Repair"}; !slices.Equal(calls[:first], want) {
		t.Errorf("calls before the first sync = %v, want %v: the first repair comes before the relist workers act on", calls[:first], want)
	}
	var relists []string
	for _, op := range calls[first:] {
		if op == "List" || op == "Repair" {
			relists = append(relists, op)
		}
	}
	if got := strings.ReplaceAll(strings.Join(relists, " "), "List Repair", ""); strings.TrimSpace(got) != "" && strings.TrimSpace(got) != "List" {
		t.Errorf("relists after the first = %v, want each List followed by a Repair", relists)
	}
}

// A restart over pods that ran on, with nothing to repair, lists the runtime once
// before the first sync: the cache takes the list the repair worked from.
func TestFirstRelistWithNothingToRepairListsOnce(t *testing.T) {
	f := newFakeRuntime(time.Now)
	pod := testPod(t, "ranon", "sleep 100", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	f.put(Container{ID: "ranon", Kind: KindContainer, PodUID: pod.UID, PodName: pod.Name, PodNamespace: pod.Namespace, Name: "c",
		Source: manifests.SourceFile, Hash: manifests.ContainerHash(&pod.Spec.Containers[0]), State: StateRunning,
		StartedAt: time.Now().Add(-time.Minute), PID: 42})
	r := runWithPod(t, f, time.Hour, pod)
	testenv.Await(t, "the pod adopted and reported running", 10*time.Second, func() bool {
		for _, p := range r.Pods() {
			if p.UID == pod.UID && p.Status.Phase == corev1.PodRunning {
				return true
			}
		}
		return false
	})
	f.mu.Lock()
	calls := slices.Clone(f.calls)
	f.mu.Unlock()
	if len(calls) < 2 || !slices.Equal(calls[:2], []string{"List", "Repair"}) || slices.Contains(calls[2:], "Create") {
		t.Fatalf("calls = %v, want List and Repair first, and the running container adopted", calls)
	}
	lists := 0
	for _, op := range calls {
		if op == "List" {
			lists++
		}
	}
	if lists != 1 {
		t.Errorf("calls = %v: %d lists before the pod ran adopted, want 1", calls, lists)
	}
}

// Busy is told of work (an update that changes what runs, a sync that acts) and of
// nothing else: the daemon's collector is lean while Busy is not called.
func TestBusyIsToldOfWorkOnly(t *testing.T) {
	h := newHarness(t)
	busy := 0
	h.r.opts.Busy = func() { busy++ }
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	pod := testPod(t, "web", "httpd -f", corev1.RestartPolicyAlways)
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		t.Fatal(err)
	}
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{pod}})
	if busy != 1 || len(spawned) != 1 {
		t.Fatalf("after the update that brings a pod: Busy called %d times, %d workers; want 1 and 1", busy, len(spawned))
	}
	l.apply(h.ctx, manifests.Update{Source: "file", Unchanged: true})
	if busy != 1 {
		t.Fatalf("an unchanged update called Busy: %d calls, want 1", busy)
	}
	h.sync(spawned[0]) // starts the pod
	if busy != 2 {
		t.Fatalf("after the sync that started the pod: Busy called %d times, want 2", busy)
	}
	h.sync(spawned[0]) // nothing to do
	h.sync(spawned[0])
	if busy != 2 {
		t.Fatalf("syncs with nothing to do called Busy: %d calls, want 2", busy)
	}
}

// A container seen created and never started (what a staticpod killed in the middle of
// a start leaves) is removed and made again under its attempt. The start that staticpod
// sent before it was killed may land in between: the removal then fails, and the
// container, running, is kept at the next sync, neither stopped nor made again nor
// counted as a restart. (A chaos test on containerd 2.x saw the removal kill it, and a
// staticpod killed next read it as started and gone, and restarted it.)
func TestANeverStartedContainerThatStartsMeanwhileIsKept(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "late", "sleep 3600", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	h.r.pub.seen[pod.UID] = t0
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	id := string(pod.UID) + "-c-0"
	if err := h.f.change(id, func(c *Container) { c.State, c.StartedAt = StateCreated, time.Time{} }); err != nil {
		t.Fatal(err) // as a restarted staticpod sees it: created, its start not yet in
	}
	gate := make(chan struct{})
	h.f.gate["RemoveContainer"] = gate
	go func() {
		testenv.Await(t, "the removal", time.Minute, func() bool { return h.f.count("RemoveContainer") == 1 })
		h.f.change(id, func(c *Container) { c.State, c.StartedAt = StateRunning, h.clock() }) // the late start lands
		close(gate)
	}()
	h.sync(w)
	h.sync(w)
	if n := h.f.count("CreateContainer"); n != 1 {
		t.Errorf("%d containers made, want the first one only", n)
	}
	if n := h.f.count("StopContainer"); n != 0 {
		t.Errorf("the running container was stopped %d times", n)
	}
	h.f.mu.Lock()
	c := h.f.containers[id]
	h.f.mu.Unlock()
	if c == nil || c.State != StateRunning {
		t.Fatalf("the container that started late is %+v, want it running", c)
	}
	if pods := h.r.Pods(); len(pods) != 1 || len(pods[0].Status.ContainerStatuses) != 1 || pods[0].Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("statuses %+v, want one container with no restart", pods)
	}
}
