package shims

import (
	"slices"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/task"
)

// A shim is ended only when it looks lost at two looks in a row, and never while this
// process creates a task for its container or while containerd lists a task and a
// record for it. A log writer is ended when its shim started a newer one for the same
// file, at two looks in a row too.
func TestLostShimsAreConfirmedAtASecondLook(t *testing.T) {
	proc := newFakeProc(t)
	proc.shim(t, 10, "ns", "served_c_0_1")    // a task and a record
	proc.shim(t, 11, "ns", "lost_c_0_1")      // a record, no task
	proc.shim(t, 12, "ns", "creating_c_0_1")  // no task yet: this process creates it
	proc.shim(t, 13, "ns", "orphan_c_0_1")    // a task, no record
	proc.shim(t, 14, "ns", "group_c_0_1")     // cleared: serves others of its group
	proc.shim(t, 15, "ns", "appearing_c_0_1") // lost at the second look only
	proc.logger(t, 20, 10, 500, "path=served")
	proc.logger(t, 21, 10, 700, "path=served") // the same file, newer: 20 is stale
	proc.logger(t, 22, 10, 600, "path=other")
	proc.logger(t, 23, 11, 400, "path=served") // another shim's
	l := NewLost(string(proc))
	l.Period = 0
	records := map[string]bool{"served_c_0_1": true, "lost_c_0_1": true, "creating_c_0_1": true, "group_c_0_1": true, "appearing_c_0_1": true}
	procs := map[string]*task.Process{"served_c_0_1": {}, "orphan_c_0_1": {}, "group_c_0_1": {}, "appearing_c_0_1": {}}
	done := l.CreatingTask("creating_c_0_1")
	l.Clear(14)
	confirm := func() ([]Proc, []int) {
		lost, stale := l.Confirm("/run/c.sock", "ns", proc.helper(), records, procs)
		slices.SortFunc(lost, func(a, b Proc) int { return a.PID - b.PID })
		var pids []int
		for _, lg := range stale {
			pids = append(pids, lg.PID)
		}
		return lost, pids
	}

	if lost, stale := confirm(); len(lost) != 0 || len(stale) != 0 {
		t.Fatalf("first look: %v lost, log writers %v stale; want none before a second look", lost, stale)
	}
	delete(procs, "appearing_c_0_1")
	lost, stale := confirm()
	if want := []Proc{{11, 100, "lost_c_0_1"}, {13, 100, "orphan_c_0_1"}}; !slices.Equal(lost, want) {
		t.Fatalf("second look: %v lost, want %v", lost, want)
	}
	if !slices.Equal(stale, []int{20}) {
		t.Fatalf("second look: log writers %v stale, want [20]", stale)
	}
	if lost, _ := confirm(); !slices.Equal(lost, []Proc{{11, 100, "lost_c_0_1"}, {13, 100, "orphan_c_0_1"}, {15, 100, "appearing_c_0_1"}}) {
		t.Fatalf("third look: %v lost, want the same two and the one lost since the second", lost)
	}
	done()
	if lost, _ := confirm(); slices.Contains(lost, Proc{12, 100, "creating_c_0_1"}) {
		t.Fatalf("a shim whose task creation just ended was taken for lost at once: %v", lost)
	}
	l.Period = time.Hour
	if lost, stale := confirm(); lost != nil || stale != nil {
		t.Fatalf("a look before the period ended: %v lost, %v stale", lost, stale)
	}

	// Out of a watch, with nothing to confirm, looks are rare.
	quiet := NewLost(string(proc))
	quiet.Period = 0
	records["lost_c_0_1"], procs["lost_c_0_1"], procs["creating_c_0_1"] = true, &task.Process{}, &task.Process{}
	records["orphan_c_0_1"], procs["appearing_c_0_1"] = true, &task.Process{}
	quiet.Clear(14)
	if lost, _ := quiet.Confirm("/run/c.sock", "ns", proc.helper(), records, procs); len(lost) != 0 {
		t.Fatalf("every shim served: %v lost", lost)
	}
	quiet.until = time.Time{}
	quiet.stale = map[int]bool{}
	looked := quiet.last
	quiet.Confirm("/run/c.sock", "ns", proc.helper(), records, procs)
	if quiet.last != looked {
		t.Fatal("looked again at once out of a watch, with nothing to confirm")
	}
	quiet.Watch()
	quiet.Confirm("/run/c.sock", "ns", proc.helper(), records, procs)
	if quiet.last == looked {
		t.Fatal("did not look again at once in a watch")
	}
}

// The first look comes a moment after the start, not at once: the first repair of a
// restart, which every pod waits for, makes none.
func TestLostLooksFirstAMomentAfterTheStart(t *testing.T) {
	proc := newFakeProc(t)
	proc.shim(t, 11, "ns", "lost_c_0_1")
	l := NewLost(string(proc))
	records, procs := map[string]bool{"lost_c_0_1": true}, map[string]*task.Process{}
	before := l.last
	l.Confirm("/run/c.sock", "ns", proc.helper(), records, procs)
	if l.last != before || len(l.suspects) != 0 {
		t.Fatalf("looked at once at the start: last %v (was %v), suspects %v", l.last, before, l.suspects)
	}
	l.last = l.last.Add(-lostShimFirst) // lostShimFirst later
	l.Confirm("/run/c.sock", "ns", proc.helper(), records, procs)
	if l.suspects[11] != "lost_c_0_1" {
		t.Fatalf("no look %s after the start: suspects %v", lostShimFirst, l.suspects)
	}
}
