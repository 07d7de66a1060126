package runner

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// A pod wanted again right after its worker removed it (its manifest directory moved
// away and back) waits for a relist that no longer shows its removed containers: its
// new containers start at attempt 0, as a new pod's, not after the removed ones.
func TestPodWantedAgainRightAfterRemovalStartsAfresh(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	pod := testPod(t, "web", "httpd", corev1.RestartPolicyAlways)
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		t.Fatal(err)
	}
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{pod}})
	if len(spawned) != 1 {
		t.Fatalf("%d workers, want 1", len(spawned))
	}
	h.sync(spawned[0])
	if got := appContainers(h.f, pod); len(got) != 1 || got[0] != "c/0" {
		t.Fatalf("containers %v, want c/0", got)
	}

	l.apply(h.ctx, manifests.Update{Source: "file"}) // the directory moved away
	for i := 0; i < 5 && !h.sync(spawned[0]); i++ {
	}
	l.workerGone(h.ctx, pod.UID)
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{pod}}) // and back, before a relist
	if len(spawned) != 1 {
		t.Fatalf("a worker started from a cache that still shows the removed containers")
	}
	events, err := h.r.pleg.Relist(h.ctx)
	l.relisted(h.ctx, relistDone{events, err})
	if len(spawned) != 2 {
		t.Fatalf("%d workers after the relist, want the pod's new one", len(spawned))
	}
	h.sync(spawned[1])
	if got := appContainers(h.f, pod); len(got) != 1 || got[0] != "c/0" {
		t.Errorf("containers of the pod wanted again: %v, want c/0 alone", got)
	}
	if len(l.gone) != 0 {
		t.Errorf("gone still holds %v after a fresh relist", l.gone)
	}
}

// appContainers are the pod's containers in the fake runtime, sandboxes left out, by
// "name/attempt".
func appContainers(f *fakeRuntime, pod *corev1.Pod) []string {
	var out []string
	for key, c := range f.byName(pod.UID) {
		if c.Kind == KindContainer {
			out = append(out, key)
		}
	}
	return out
}
