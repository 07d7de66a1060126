package runner

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// listerFunc adapts a function to Lister.
type listerFunc func(context.Context) ([]Container, error)

func (f listerFunc) List(ctx context.Context) ([]Container, error) { return f(ctx) }

func TestPLEGRelist(t *testing.T) {
	var (
		now  = t0
		list []Container
		err  error
	)
	p := NewPLEG(listerFunc(func(context.Context) ([]Container, error) { return list, err }), func() time.Time { return now })
	relist := func() []string {
		t.Helper()
		events, rerr := p.Relist(context.Background())
		if rerr != nil {
			t.Fatalf("Relist: %v", rerr)
		}
		var out []string
		for _, e := range events {
			out = append(out, string(e.UID)+" "+string(e.Type)+" "+e.ContainerID)
		}
		sort.Strings(out)
		return out
	}
	c := func(id string, uid string, state State, pid uint32) Container {
		return Container{ID: id, PodUID: typesUID(uid), Kind: KindContainer, State: state, PID: pid}
	}

	list = []Container{c("a", "p1", StateRunning, 10), c("b", "p2", StateCreated, 0)}
	if diff := cmp.Diff([]string{"p1 ContainerStarted a", "p2 ContainerChanged b"}, relist()); diff != "" {
		t.Errorf("first relist (-want +got):\n%s", diff)
	}
	if got := relist(); len(got) != 0 {
		t.Errorf("unchanged relist = %v, want no events", got)
	}
	list = []Container{c("a", "p1", StateExited, 0), c("b", "p2", StateRunning, 20)}
	if diff := cmp.Diff([]string{"p1 ContainerDied a", "p2 ContainerStarted b"}, relist()); diff != "" {
		t.Errorf("second relist (-want +got):\n%s", diff)
	}

	// A failed relist keeps the old records: the change is reported by the next one.
	list, err = []Container{c("b", "p2", StateRunning, 20)}, errors.New("containerd down")
	if _, rerr := p.Relist(context.Background()); rerr == nil {
		t.Fatal("Relist did not report the runtime's error")
	}
	err = nil
	if diff := cmp.Diff([]string{"p1 ContainerRemoved a"}, relist()); diff != "" {
		t.Errorf("relist after a failure (-want +got):\n%s", diff)
	}

	if pr, _ := p.Pod("p2"); len(pr.Containers) != 1 || pr.Containers[0].PID != 20 {
		t.Errorf("cache of p2 = %+v", pr)
	}
	if ok, _ := p.Healthy(); !ok {
		t.Error("PLEG unhealthy right after a relist")
	}
	now = now.Add(relistUnhealthy)
	if ok, _ := p.Healthy(); ok {
		t.Error("PLEG healthy 3 minutes after its last relist")
	}
}

func typesUID(s string) types.UID { return types.UID(s) }

// TestPLEGCacheHoldsEachPodsOwn checks the pods' layout in the cache: each pod's
// sandboxes and containers, in the order listed, none of another pod's, and an append
// by a reader of one pod leaves the next pod's as they were.
func TestPLEGCacheHoldsEachPodsOwn(t *testing.T) {
	list := []Container{
		{ID: "a-c1", PodUID: "a", Kind: KindContainer},
		{ID: "b-sb", PodUID: "b", Kind: KindSandbox},
		{ID: "a-sb", PodUID: "a", Kind: KindSandbox},
		{ID: "b-c1", PodUID: "b", Kind: KindContainer},
		{ID: "a-c2", PodUID: "a", Kind: KindContainer},
		{ID: "c-c1", PodUID: "c", Kind: KindContainer},
	}
	p := NewPLEG(listerFunc(func(context.Context) ([]Container, error) { return list, nil }), time.Now)
	if _, err := p.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids := func(cs []Container) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	want := map[types.UID][2][]string{
		"a": {{"a-sb"}, {"a-c1", "a-c2"}},
		"b": {{"b-sb"}, {"b-c1"}},
		"c": {nil, {"c-c1"}},
	}
	pods := p.Pods()
	if len(pods) != len(want) {
		t.Fatalf("%d pods cached, want %d", len(pods), len(want))
	}
	for uid, w := range want {
		pr, _ := p.Pod(uid)
		if diff := cmp.Diff(w, [2][]string{ids(pr.Sandboxes), ids(pr.Containers)}); diff != "" {
			t.Errorf("pod %s (-want +got):\n%s", uid, diff)
		}
		if uid == "c" && pr.Sandboxes != nil {
			t.Errorf("pod c's sandboxes = %#v, want nil", pr.Sandboxes)
		}
	}
	for uid := range want {
		pr, _ := p.Pod(uid)
		_ = append(pr.Sandboxes, Container{ID: "appended"})
		_ = append(pr.Containers, Container{ID: "appended"})
	}
	for uid, w := range want {
		pr, _ := p.Pod(uid)
		if diff := cmp.Diff(w, [2][]string{ids(pr.Sandboxes), ids(pr.Containers)}); diff != "" {
			t.Errorf("pod %s after appends by readers (-want +got):\n%s", uid, diff)
		}
	}
}
