package runner

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// UIDHolder, which pushes ask, answers only once it can know (UIDsKnown): after the
// runtime was listed and every source read. Then it names the pod a source wants, else
// the pod whose containers run under the UID, wanted or not.
func TestUIDHolderKnowsWhatRunsOnceTheSourcesAreRead(t *testing.T) {
	h := newHarness(t)
	h.r.pub.sources = []string{"file", "api"}
	l := newLoop(h.r, &sync.WaitGroup{})
	l.spawn = func(context.Context, *worker) {}
	filePod := runningFilePod(t, h.f)
	known := func() bool {
		select {
		case <-h.r.UIDsKnown():
			return true
		default:
			return false
		}
	}
	holder := func() string {
		t.Helper()
		pod, err := h.r.UIDHolder(sharedUID)
		switch {
		case err != nil:
			return "error: " + err.Error()
		case pod == nil:
			return "none"
		}
		return manifests.Origin(pod)
	}
	if got := holder(); got != "error: sources not all read yet (file, api)" || known() {
		t.Errorf("at start: %s; want an error naming the unread sources", got)
	}
	l.apply(h.ctx, manifests.Update{Source: "api"})
	l.apply(h.ctx, manifests.Update{Source: "file"})
	if got := holder(); got != "error: the runtime not listed yet" || known() {
		t.Errorf("sources read, the runtime not listed: %s; want an error saying so", got)
	}
	res, err := h.r.pleg.Relist(h.ctx)
	l.relisted(h.ctx, relistDone{res, err})
	want := "pod default/etcd-n from file etcd.yaml"
	if !known() {
		t.Error("UIDsKnown not closed once the runtime was listed and every source read")
	}
	if got := holder(); got != want {
		t.Errorf("a container runs under the UID, no source wants it: %s; want %s", got, want)
	}
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{filePod}})
	if got := holder(); got != want {
		t.Errorf("the file source wants it: %s; want %s", got, want)
	}
	if pod, err := h.r.UIDHolder("another"); pod != nil || err != nil {
		t.Errorf("UIDHolder of a UID nobody has = %v, %v; want none", pod, err)
	}

	// A pod no longer wanted whose worker still removes it holds its UID, also when
	// the last relist predates its containers.
	fresh := testPod(t, "fresh", "sleep 3600", corev1.RestartPolicyAlways)
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{filePod, fresh}})
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{filePod}})
	if pod, err := h.r.UIDHolder(fresh.UID); pod == nil || manifests.Key(pod) != manifests.Key(fresh) {
		t.Errorf("UIDHolder of a pod being removed = %v, %v; want %s", pod, err, manifests.Key(fresh))
	}
	l.workerGone(h.ctx, fresh.UID)
	if pod, err := h.r.UIDHolder(fresh.UID); pod != nil || err != nil {
		t.Errorf("UIDHolder of a pod removed = %v, %v; want none", pod, err)
	}
}
