package containerdrt

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/staticpod/staticpod/internal/testenv"
)

// A relist lists every container record only every recordsRefresh. Between, it sees a
// write through the Runtime at once, from containerd's answer to it, and a change made
// by another client once it is reported (RecordsChanged, from containerd's events), by
// reading that record alone.
func TestListReusesRecordsUntilTheyChange(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: records}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	cs := r.mustRunPod(t, pod)
	id := cs["c"].ID
	label := func() string {
		t.Helper()
		all, err := r.relist(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range all {
			if c.ID == id {
				return c.StopDeadline.UTC().Format(time.RFC3339) // as labelStopDeadline holds it
			}
		}
		t.Fatalf("container %s not listed", id)
		return ""
	}
	label()
	taken := r.records.taken
	label()
	if r.records.taken != taken {
		t.Fatal("the records were listed again although nothing changed them")
	}

	stamp := func(sec int) string { return time.Unix(int64(sec), 0).UTC().Format(time.RFC3339) }
	own, theirs, later := stamp(1000), stamp(2000), stamp(3000)
	// Until containerd's events of record changes are known to arrive, a write through
	// the Runtime has every record listed anew: another client's may go unreported.
	if _, err := r.setLabels(r.ctx, id, map[string]string{labelStopDeadline: stamp(500)}); err != nil {
		t.Fatal(err)
	}
	if got := label(); got != stamp(500) || r.records.taken == taken {
		t.Fatalf("before any event: List reports %q after a write through the Runtime, listed all anew: %v; want %s, anew", got, r.records.taken != taken, stamp(500))
	}
	// The exit watch's first event: one more list of all, then the events are trusted.
	r.recordsChanged(recordEvent{id: id, op: "update"})
	label()
	taken = r.records.taken
	gets := func() uint64 { return r.Calls()["/containerd.services.containers.v1.Containers/Get"] }
	// A write through the Runtime is seen by the next List, with no read.
	if _, err := r.setLabels(r.ctx, id, map[string]string{labelStopDeadline: own}); err != nil {
		t.Fatal(err)
	}
	before := gets()
	if got := label(); got != own {
		t.Fatalf("after a write through the Runtime List reports %q, want %s", got, own)
	}
	if r.records.taken != taken || gets() != before {
		t.Fatalf("after a write through the Runtime the records were read again (%d reads of one)", gets()-before)
	}

	// Another client's write is seen once reported, not before.
	d := ctd.Daemon(t)
	ctx := namespaces.WithNamespace(context.Background(), r.cfg.Namespace)
	c, err := d.Client.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetLabels(ctx, map[string]string{labelStopDeadline: theirs}); err != nil {
		t.Fatal(err)
	}
	if got := label(); got != own {
		t.Fatalf("another client's unreported write: List reports %q, want the records reused (%s)", got, own)
	}
	before = gets()
	r.recordsChanged(recordEvent{id: id, op: "update", labels: map[string]string{labelStopDeadline: theirs}})
	if got := label(); got != theirs {
		t.Fatalf("after the report of the change List reports %q, want %s", got, theirs)
	}
	if r.records.taken != taken || gets() != before+1 {
		t.Fatalf("after the report of the change of one record: %d reads of one, all listed again: %v; want that one read",
			gets()-before, r.records.taken != taken)
	}
	r.records.mu.Lock()
	r.records.taken = time.Now().Add(-recordsRefresh)
	r.records.mu.Unlock()
	if _, err := c.SetLabels(ctx, map[string]string{labelStopDeadline: later}); err != nil {
		t.Fatal(err)
	}
	if got := label(); got != later {
		t.Fatalf("after recordsRefresh List reports %q, want %s", got, later)
	}
}

// The exit watch reports changes of container records made by anyone, and those of
// another client have their record read again; those of the Runtime's own writes do
// not. The watch starts once the Runtime's own writes are done, so that only events of
// the other client's writes can count: until the watch has subscribed they are lost, so
// the other client writes again at every poll.
func TestWatchExitsReportsRecordChanges(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: watched}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	cs := r.mustRunPod(t, pod)
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	watched := make(chan error, 1)
	go func() { watched <- r.WatchExits(ctx, func() {}) }()
	defer func() {
		cancel()
		if err := <-watched; err != nil {
			t.Errorf("WatchExits: %v", err)
		}
	}()
	before := r.records.changes.Load()
	cctx := namespaces.WithNamespace(context.Background(), r.cfg.Namespace)
	c, err := ctd.Daemon(t).Client.LoadContainer(cctx, cs["c"].ID)
	if err != nil {
		t.Fatal(err)
	}
	writes := 0
	testenv.Await(t, "another client's write to be reported", 10*time.Second, func() bool {
		writes++
		if _, err := c.SetLabels(cctx, map[string]string{labelMessage: "theirs-" + strconv.Itoa(writes)}); err != nil {
			t.Fatal(err)
		}
		return r.records.changes.Load() > before
	})
	if !r.stale(cs["c"].ID) {
		t.Fatal("another client's write was reported, and its record is not to be read again")
	}

	if _, err := r.relist(r.ctx); err != nil { // reads it again
		t.Fatal(err)
	}

	// The event of a write the Runtime made itself: its record is not read again.
	labels, err := r.setLabels(r.ctx, cs["c"].ID, map[string]string{labelMessage: "ours"})
	if err != nil {
		t.Fatal(err)
	}
	r.recordsChanged(recordEvent{id: cs["c"].ID, op: "update", labels: labels})
	if r.stale(cs["c"].ID) {
		t.Fatal("the event of the Runtime's own write has its record read again")
	}
}

// stale tells whether the next List reads record id again.
func (r *testRuntime) stale(id string) bool {
	r.records.mu.Lock()
	defer r.records.mu.Unlock()
	return r.records.stale[id]
}
