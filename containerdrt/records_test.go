package containerdrt

import (
	"context"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// A relist lists the container records again only when they may have changed: after a
// write through the Runtime at once, after a change made by another client once it is
// reported (RecordsChanged, from containerd's events) or recordsRefresh has passed.
func TestListReusesRecordsUntilTheyChange(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: records}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	cs := r.mustRunPod(t, pod)
	id := cs["c"].ID
	label := func() string {
		t.Helper()
		all, err := r.List(r.ctx)
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
	// A write through the Runtime is seen by the next List.
	if _, err := r.setLabels(r.ctx, id, map[string]string{labelStopDeadline: own}); err != nil {
		t.Fatal(err)
	}
	if got := label(); got != own {
		t.Fatalf("after a write through the Runtime List reports %q, want %s", got, own)
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
	r.RecordsChanged()
	if got := label(); got != theirs {
		t.Fatalf("after RecordsChanged List reports %q, want %s", got, theirs)
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

// The exit watch reports changes of container records made by anyone.
func TestWatchExitsReportsRecordChanges(t *testing.T) {
	r := newTestRuntime(t)
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	go r.WatchExits(ctx, func() {})
	time.Sleep(200 * time.Millisecond) // subscribed
	before := r.records.changes.Load()
	d := ctd.Daemon(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: watched}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	cs := r.mustRunPod(t, pod)
	counted := r.records.changes.Load() // the Runtime's own writes, and their events
	cctx := namespaces.WithNamespace(context.Background(), r.cfg.Namespace)
	c, err := d.Client.LoadContainer(cctx, cs["c"].ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetLabels(cctx, map[string]string{labelMessage: "theirs"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.records.changes.Load() == counted {
		if time.Now().After(deadline) {
			t.Fatalf("another client's write was not reported (changes %d before the pod, %d after)", before, counted)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
