package runner

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestGarbage(t *testing.T) {
	c := func(id string, uid types.UID, kind Kind, name string, attempt int, state State) Container {
		started := t0
		if state == StateCreated {
			started = time.Time{}
		}
		return Container{ID: id, PodUID: uid, Kind: kind, Name: name, Attempt: attempt, State: state, StartedAt: started}
	}
	neverStarted := c("web-g0", "web", KindContainer, "g", 0, StateExited) // a created task, stopped
	neverStarted.StartedAt = time.Time{}
	all := []Container{
		c("web-sb0", "web", KindSandbox, "web", 0, StateExited),
		c("web-sb1", "web", KindSandbox, "web", 1, StateRunning),
		c("web-c0", "web", KindContainer, "c", 0, StateExited),
		c("web-c1", "web", KindContainer, "c", 1, StateExited),
		c("web-c2", "web", KindContainer, "c", 2, StateRunning),
		c("web-d0", "web", KindContainer, "d", 0, StateExited),  // latest attempt of d: kept
		c("job-c0", "job", KindContainer, "c", 0, StateExited),  // finished job still wanted: kept
		c("old-c3", "old", KindContainer, "c", 3, StateExited),  // pod gone: collected
		c("old-r0", "old", KindContainer, "r", 0, StateRunning), // running: never garbage
		c("web-e0", "web", KindContainer, "e", 0, StateCreated), // never started, replaced: collected
		c("web-e1", "web", KindContainer, "e", 1, StateRunning),
		c("web-f0", "web", KindContainer, "f", 0, StateCreated), // being started: kept
		c("old-s0", "old", KindContainer, "s", 0, StateCreated), // never started, pod gone: collected
		neverStarted, // replaced: collected, not kept as g's last exit
		c("web-g1", "web", KindContainer, "g", 1, StateRunning),
	}
	keep := map[types.UID]bool{"web": true, "job": true}
	var got []string
	for _, g := range Garbage(all, keep) {
		got = append(got, g.ID)
	}
	want := []string{"web-sb0", "web-c0", "old-c3", "web-e0", "old-s0", "web-g0"} // web-c1 stays: the last exit of c, for logs --previous
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Garbage (-want +got):\n%s", diff)
	}
}
