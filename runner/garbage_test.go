package runner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestGarbage(t *testing.T) {
	c := func(id string, uid types.UID, kind Kind, name string, attempt int, state State) Container {
		return Container{ID: id, PodUID: uid, Kind: kind, Name: name, Attempt: attempt, State: state}
	}
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
	}
	keep := map[types.UID]bool{"web": true, "job": true}
	var got []string
	for _, g := range Garbage(all, keep) {
		got = append(got, g.ID)
	}
	want := []string{"web-sb0", "web-c0", "old-c3"} // web-c1 stays: the last exit of c, for logs --previous
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Garbage (-want +got):\n%s", diff)
	}
}
