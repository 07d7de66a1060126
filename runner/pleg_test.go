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
