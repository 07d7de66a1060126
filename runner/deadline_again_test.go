package runner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// A pod removed and wanted again is a new instance of it, as on the kubelet (whose
// status manager forgets a removed pod's status, and with it its startTime): its active
// deadline counts from when it came back, even though containers of the removed pod,
// which staticpod failed to remove, still record the removed pod's start. A restart
// of staticpod then keeps the new instance's start, not the leftovers'.
func TestPodWantedAgainAfterRemovalCountsItsDeadlineAfresh(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	relist := func() {
		events, err := h.r.pleg.Relist(h.ctx)
		l.relisted(h.ctx, relistDone{events, err})
	}
	pod := deadlinePod(t, 3)
	relist()
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{pod}})
	h.sync(spawned[0]) // started at t0

	h.tick(2 * time.Second)
	h.f.mu.Lock()
	h.f.fail["RemoveContainer"] = errors.New("device or resource busy")
	h.f.mu.Unlock()
	l.apply(h.ctx, manifests.Update{Source: "file"}) // the manifest removed
	for i := 0; i < 5 && !h.sync(spawned[0]); i++ {
	}
	l.workerGone(h.ctx, pod.UID)
	if c, ok := h.f.byName(pod.UID)["c/0"]; !ok || c.State != StateExited {
		t.Fatalf("the removed pod's container is %+v, want it left behind, exited", c)
	}
	h.f.mu.Lock()
	delete(h.f.fail, "RemoveContainer")
	h.f.mu.Unlock()

	h.tick(2 * time.Second) // 4 s after the removed pod's start: past its deadline
	back := h.clock()
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{pod}}) // and restored
	relist()
	if len(spawned) != 2 {
		t.Fatalf("%d workers, want the restored pod's own", len(spawned))
	}
	if len(l.removed) != 0 {
		t.Errorf("removed still holds %v once the pod's new worker started", l.removed)
	}
	w := spawned[1]
	h.sync(w)
	st := h.status(pod.UID)
	if st.Phase == corev1.PodFailed || st.StartTime == nil || !st.StartTime.Time.Equal(back) {
		t.Fatalf("the restored pod is %s (%q), startTime %v; want it running from %v, its own start", st.Phase, st.Reason, st.StartTime, back)
	}
	if c := h.f.byName(pod.UID)["c/1"]; c.State != StateRunning {
		t.Fatalf("the restored pod's container is %q, want running", c.State)
	}

	h.tick(2 * time.Second) // 2 s after it came back, staticpod restarts
	h.restart()
	l = newLoop(h.r, &sync.WaitGroup{})
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	relist()
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{pod}})
	if len(spawned) != 3 {
		t.Fatalf("%d workers, want the adopted pod's", len(spawned))
	}
	w = spawned[2]
	h.sync(w)
	if st := h.status(pod.UID); st.Phase != corev1.PodRunning || st.StartTime == nil || !st.StartTime.Time.Equal(back) {
		t.Fatalf("after a restart the pod is %s (%q), startTime %v; want running from %v", st.Phase, st.Reason, st.StartTime, back)
	}

	h.tick(time.Second) // 3 s after it came back: its own deadline
	h.sync(w)
	if st := h.status(pod.UID); st.Phase != corev1.PodFailed || st.Reason != ReasonDeadlineExceeded {
		t.Errorf("3 s after it came back the pod is %s (%q), want Failed %q", st.Phase, st.Reason, ReasonDeadlineExceeded)
	}
}

// What the loop remembers of a removed pod to tell its next instance from it goes once
// a relist shows that nothing of the pod is left.
func TestRemovedPodIsForgottenOnceNothingOfItIsLeft(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	relist := func() {
		events, err := h.r.pleg.Relist(h.ctx)
		l.relisted(h.ctx, relistDone{events, err})
	}
	pod := deadlinePod(t, 3)
	relist()
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{pod}})
	h.sync(spawned[0])
	l.apply(h.ctx, manifests.Update{Source: "file"})
	for i := 0; i < 5 && !h.sync(spawned[0]); i++ {
	}
	l.workerGone(h.ctx, pod.UID)
	if _, ok := l.removed[pod.UID]; !ok {
		t.Fatalf("removed = %v, want the pod's UID until a relist shows nothing of it", l.removed)
	}
	relist()
	if len(l.removed) != 0 {
		t.Errorf("removed still holds %v after a relist that shows nothing of the pod", l.removed)
	}
}
