package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/prepull"
)

// withImage is pod name with image, under the UID its content gives it.
func withImage(t *testing.T, name, image string) *corev1.Pod {
	t.Helper()
	manifest := "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  restartPolicy: Always\n  containers:\n  - {name: c, image: " + image + ", command: [sh, -c, serve]}\n"
	res := manifests.Load([]byte(manifest), manifests.Options{NodeName: "n", Source: manifests.Source{Kind: manifests.SourceFile, Location: name + ".yaml"}})
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	return res.Pods[0]
}

// updating is a loop whose pod "web" runs busybox:1.36 in a worker the test syncs.
type updating struct {
	h       *harness
	l       *loop
	spawned []*worker
	old     *corev1.Pod
	after   chan time.Duration // the back-offs the pre-pulls wait, one each
	fire    chan time.Time     // ends the back-off waited
}

func newUpdating(t *testing.T) *updating {
	u := &updating{h: newHarness(t), after: make(chan time.Duration, 10), fire: make(chan time.Time)}
	u.l = newLoop(u.h.r, &sync.WaitGroup{})
	u.l.spawn = func(_ context.Context, w *worker) { u.spawned = append(u.spawned, w) }
	u.l.prepulls.After = func(d time.Duration) <-chan time.Time { u.after <- d; return u.fire }
	u.old = withImage(t, "web", "busybox:1.36")
	u.h.r.pleg.Relist(u.h.ctx)
	u.l.apply(u.h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{u.old}})
	u.h.sync(u.spawned[0])
	if u.h.f.byName(u.old.UID)["c/0"].State != StateRunning {
		t.Fatal("the old pod does not run")
	}
	u.h.r.pleg.Relist(u.h.ctx)
	return u
}

// edit delivers pod as the file's new content.
func (u *updating) edit(pod *corev1.Pod) {
	u.l.apply(u.h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{pod}})
}

// result takes the next end of a pre-pull's round and acts on it, as the loop does.
func (u *updating) result() prepull.Result { return takePrepull(u.h.t, u.l) }

// takePrepull takes the next end of one of l's pre-pulls' rounds and acts on it, as
// the loop does.
func takePrepull(t *testing.T, l *loop) prepull.Result {
	t.Helper()
	select {
	case res := <-l.prepulls.Results():
		l.prepulled(context.Background(), res)
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("no pre-pull reported: the images of the edited pod were not pulled first")
		return prepull.Result{}
	}
}

// pulled awaits an EnsureImage of image.
func (u *updating) pulled(image string) {
	u.h.t.Helper()
	testenv.Await(u.h.t, "a pull of "+image, 10*time.Second, func() bool {
		u.h.f.mu.Lock()
		defer u.h.f.mu.Unlock()
		return slices.ContainsFunc(u.h.f.pulls, func(r PullRequest) bool { return r.Image == image })
	})
}

// oldKeepsRunning syncs the old pod's worker a few times and fails unless it still runs
// and nothing of new was made.
func (u *updating) oldKeepsRunning(new types.UID) {
	u.h.t.Helper()
	w := u.spawned[0]
	for range 3 {
		u.h.sync(w)
	}
	if w.killed() || u.h.f.byName(u.old.UID)["c/0"].State != StateRunning {
		u.h.t.Fatalf("the old pod was stopped (killed %v) before the new one's images were present", w.killed())
	}
	if len(u.spawned) != 1 || len(u.h.f.byName(new)) != 0 {
		u.h.t.Fatalf("%d workers, %d containers of the new pod; want only the old one", len(u.spawned), len(u.h.f.byName(new)))
	}
}

// replaced stops the old pod as its worker does and checks that the new one starts only
// once the old one is gone: never two instances at once.
func (u *updating) replaced(edited *corev1.Pod) {
	u.h.t.Helper()
	w := u.spawned[0]
	if !w.killed() {
		u.h.t.Fatal("the old pod was not stopped once the images were present")
	}
	for i := 0; i < 3 && !u.h.sync(w); i++ {
		if len(u.spawned) != 1 || len(u.h.f.byName(edited.UID)) != 0 {
			u.h.t.Fatal("the new pod started while the old one was still stopping")
		}
	}
	u.l.workerGone(u.h.ctx, u.old.UID)
	if len(u.spawned) != 2 || u.spawned[1].uid != edited.UID {
		u.h.t.Fatalf("after the old pod went: %d workers; want the edited pod's", len(u.spawned))
	}
	u.h.sync(u.spawned[1])
	if c := u.h.f.byName(edited.UID)["c/0"]; c.State != StateRunning {
		u.h.t.Fatalf("the edited pod's container is %v, want running", c.State)
	}
}

func TestEditKeepsTheOldPodRunningUntilTheNewImagesArePulled(t *testing.T) {
	u := newUpdating(t)
	gate := make(chan struct{})
	u.h.f.mu.Lock()
	u.h.f.gate["EnsureImage"] = gate
	u.h.f.mu.Unlock()
	edited := withImage(t, "web", "busybox:1.37")
	u.edit(edited)
	u.pulled("busybox:1.37")
	u.oldKeepsRunning(edited.UID)
	st := u.h.r.Pods()
	if len(st) != 1 || st[0].UID != edited.UID || st[0].Status.Phase != corev1.PodPending || !strings.Contains(st[0].Status.Message, "keeps running") {
		t.Fatalf("status while pulling = %+v; want the edited pod Pending, saying the running revision keeps running", st)
	}
	close(gate)
	if res := u.result(); res.Err != nil || res.Pod.UID != edited.UID {
		t.Fatalf("pre-pull = %v for %s; want the edited pod's images present", res.Err, res.Pod.UID)
	}
	u.replaced(edited)
}

// The edited pod's pending status shows how far its pull is: its container waits
// ContainerCreating with the bytes, the pod's message still says what keeps running.
func TestEditShowsThePullsProgressInThePendingStatus(t *testing.T) {
	u := newUpdating(t)
	u.h.f.pullProgress = []wire.PullProgress{{Done: 1_000_000, Total: 4_000_000}}
	edited := withImage(t, "web", "busybox:1.37")
	var during []*corev1.Pod
	u.h.f.whilePulling = func() { during = append(during, u.h.r.Pods()...) }
	u.edit(edited)
	if res := u.result(); res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(during) != 1 || during[0].UID != edited.UID {
		t.Fatalf("pods while pulling = %v; want the edited one", during)
	}
	st := during[0].Status
	want := corev1.ContainerStateWaiting{Reason: ReasonContainerCreating, Message: `Pulling image "busybox:1.37": 1.0 MB of 4.0 MB`}
	if w := st.ContainerStatuses[0].State.Waiting; st.Phase != corev1.PodPending || w == nil || *w != want || !strings.Contains(st.Message, "keeps running") {
		t.Errorf("status while pulling = %s %q, container %+v; want Pending, the running revision kept, and %+v", st.Phase, st.Message, st.ContainerStatuses[0].State, want)
	}
}

func TestFailedPullKeepsTheOldPodAndRetries(t *testing.T) {
	u := newUpdating(t)
	u.h.f.pullFail = map[string]error{"busybox:1.37": errors.New("ErrImagePull: not found")}
	edited := withImage(t, "web", "busybox:1.37")
	u.edit(edited)
	res := u.result()
	if res.Err == nil || res.Image != "busybox:1.37" {
		t.Fatalf("pre-pull = %v of %q; want busybox:1.37 failed", res.Err, res.Image)
	}
	if d := <-u.after; d != prepull.BackoffInitial { // sent before the pull waits
		t.Fatalf("retry in %v, want %v", d, prepull.BackoffInitial)
	}
	u.oldKeepsRunning(edited.UID)
	var reasons []string
	for _, e := range u.h.r.Events().Pod(edited.UID) {
		reasons = append(reasons, e.Reason+": "+e.Message)
	}
	if !slices.ContainsFunc(reasons, func(s string) bool { return strings.HasPrefix(s, `Failed: Failed to pull image "busybox:1.37"`) }) ||
		!slices.Contains(reasons, `BackOff: Back-off pulling image "busybox:1.37"`) {
		t.Fatalf("events of the edited pod = %q; want Failed and BackOff", reasons)
	}
	st := u.h.r.Pods()
	if len(st) != 1 || !strings.Contains(st[0].Status.Message, `pulling image "busybox:1.37" failed, the running revision`) ||
		st[0].Status.ContainerStatuses[0].State.Waiting.Reason != ReasonImagePullBackOff {
		t.Fatalf("status after a failed pull = %+v; want the image and the kept revision named", st)
	}

	u.h.f.mu.Lock()
	u.h.f.pullFail = nil // the registry is back
	u.h.f.mu.Unlock()
	u.fire <- time.Time{}
	if res := u.result(); res.Err != nil {
		t.Fatalf("retried pre-pull = %v, want the images present", res.Err)
	}
	u.replaced(edited)
}

func TestSecondEditReplacesThePendingPull(t *testing.T) {
	u := newUpdating(t)
	gate := make(chan struct{})
	u.h.f.mu.Lock()
	u.h.f.gate["EnsureImage"] = gate
	u.h.f.mu.Unlock()
	first := withImage(t, "web", "example.com/typo:1")
	u.edit(first)
	u.pulled("example.com/typo:1")
	edited := withImage(t, "web", "busybox:1.37")
	u.edit(edited)
	u.pulled("busybox:1.37")
	u.oldKeepsRunning(edited.UID)
	close(gate)
	for res := u.result(); res.Pod.UID != edited.UID; res = u.result() {
		if u.spawned[0].killed() {
			t.Fatal("the pull of a replaced edit stopped the old pod")
		}
	}
	if p := u.l.pending[manifests.Key(edited)]; p == nil || p.UID != edited.UID {
		t.Fatalf("pending = %v; want the second edit", u.l.pending)
	}
	u.replaced(edited)
}

func TestEditedWhileDownPullsBeforeStoppingTheOldInstance(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	old := withImage(t, "api", "busybox:1.36")
	edited := withImage(t, "api", "busybox:1.37")
	h.f.put(Container{ID: "old", Kind: KindContainer, PodUID: old.UID, PodName: old.Name, PodNamespace: old.Namespace, Name: "c", State: StateRunning, Source: "file"})
	gate := make(chan struct{})
	h.f.gate["EnsureImage"] = gate
	h.r.pleg.Relist(h.ctx)
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{edited}})
	l.housekeeping(h.ctx) // the old instance is no orphan to remove meanwhile
	if len(spawned) != 0 {
		t.Fatalf("%d workers while the edited pod's images are pulled; want the old instance left running", len(spawned))
	}
	close(gate)
	takePrepull(t, l)
	if len(spawned) != 1 || spawned[0].uid != old.UID || !spawned[0].killed() {
		t.Fatalf("%d workers once the images were present; want the old instance's killer", len(spawned))
	}
	for i := 0; i < 3 && !h.sync(spawned[0]); i++ {
		if len(h.f.byName(edited.UID)) != 0 {
			t.Fatal("the edited pod started while the old instance still ran")
		}
	}
	l.workerGone(h.ctx, old.UID)
	if len(spawned) != 2 || spawned[1].uid != edited.UID {
		t.Fatalf("the edited pod did not start after the old instance went (%d workers)", len(spawned))
	}
}
