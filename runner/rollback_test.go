package runner

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/revisions"
)

// rollbacks drives a loop whose runner keeps revisions under dir, with the workers it
// spawns run by hand.
type rollbacks struct {
	*harness
	l       *loop
	spawned []*worker
	revs    string   // the revisions dir, which a restarted runner reads again
	names   []string // of the pods applied
}

func newRollbacks(t *testing.T) *rollbacks {
	rb := &rollbacks{harness: newHarness(t), revs: t.TempDir()}
	rb.restartOn(rb.f)
	return rb
}

// restartOn replaces the runner and its loop with new ones on runtime f and the same
// dirs, as a restart of staticpod (kill -9 included) does.
func (rb *rollbacks) restartOn(f *fakeRuntime) {
	rb.t.Helper()
	store, err := revisions.Open(revisions.Options{Dir: rb.revs, Now: rb.clock})
	if err != nil {
		rb.t.Fatal(err)
	}
	rb.f = f
	rb.r, err = New(Options{Runtime: f, Now: rb.clock, HostIP: "10.0.0.1", ResultsDir: rb.dir, Revisions: store})
	if err != nil {
		rb.t.Fatal(err)
	}
	rb.l = newLoop(rb.r, &sync.WaitGroup{})
	rb.spawned = nil
	rb.l.spawn = func(_ context.Context, w *worker) { rb.spawned = append(rb.spawned, w) }
}

func (rb *rollbacks) relist() {
	res, err := rb.r.pleg.Relist(rb.ctx)
	rb.l.relisted(rb.ctx, relistDone{res, err})
	rb.pullsDone()
}

func (rb *rollbacks) apply(pods ...*corev1.Pod) {
	rb.l.apply(rb.ctx, manifests.Update{Source: manifests.SourceFile, Pods: pods})
	for _, pod := range pods {
		rb.names = append(rb.names, manifests.Key(pod))
	}
	rb.pullsDone()
}

// pullsDone lets the pulls of the images of a revision that replaces a running one
// (loop_prepull.go; a rollback's too) end, and the loop act on them.
func (rb *rollbacks) pullsDone() {
	rb.t.Helper()
	for _, name := range rb.names {
		for rb.l.prepulls.Pulling(name) {
			takePrepull(rb.t, rb.l)
		}
	}
}

// worker is the loop's worker of uid; it fails the test without one.
func (rb *rollbacks) worker(uid types.UID) *worker {
	rb.t.Helper()
	w := rb.l.workers[uid]
	if w == nil {
		rb.t.Fatalf("no worker for %s; workers %v", uid, rb.l.workers)
	}
	return w
}

// runs syncs the worker of uid twice (start, then a status of what runs) and relists.
func (rb *rollbacks) runs(uid types.UID) {
	rb.t.Helper()
	w := rb.worker(uid)
	rb.sync(w)
	rb.sync(w)
	rb.relist()
}

// removes syncs the killed worker of uid until its pod is gone, and tells the loop.
func (rb *rollbacks) removes(uid types.UID) {
	rb.t.Helper()
	w := rb.worker(uid)
	for i := 0; !rb.sync(w); i++ {
		if i == 5 {
			rb.t.Fatalf("the pod of %s was not removed in 5 syncs", uid)
		}
	}
	rb.l.workerGone(rb.ctx, uid)
}

// crashes makes the container of uid exit with 1 twice, its worker see it and restart
// it once: then it is in CrashLoopBackOff.
func (rb *rollbacks) crashes(uid types.UID) {
	rb.t.Helper()
	for range 2 {
		for _, c := range rb.f.byName(uid) {
			if c.State == StateRunning {
				rb.f.exit(c.ID, 1)
			}
		}
		rb.sync(rb.worker(uid))
	}
	if r := rb.worker(uid).obs.Waiting["c"].Reason; r != ReasonCrashLoopBackOff {
		rb.t.Fatalf("container of %s waits for %q, want CrashLoopBackOff", uid, r)
	}
}

// revision is pod web of the version v (its command), with a progress deadline of 5s.
func revision(t *testing.T, v string) *corev1.Pod {
	pod := testPod(t, "web", "serve "+v, corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	pod.Annotations[manifests.AnnotationProgressDeadline] = "5"
	return pod
}

// edit applies pod, in place of the one uid runs: the old one goes first, then it
// starts.
func (rb *rollbacks) edit(from types.UID, pod *corev1.Pod) {
	rb.t.Helper()
	rb.apply(pod)
	rb.removes(from)
	rb.runs(pod.UID)
}

func (rb *rollbacks) rolledBack(uid types.UID) []string {
	var out []string
	for _, e := range rb.r.events.Pod(uid) {
		if e.Reason == revisions.ReasonRolledBack {
			out = append(out, e.Type+" "+e.Message)
		}
	}
	return out
}

// v1Readyv2Crashing is a pod whose v1 was Ready, edited to a v2 whose container exits.
func v1Readyv2Crashing(t *testing.T) (rb *rollbacks, v1, v2 *corev1.Pod) {
	rb = newRollbacks(t)
	v1, v2 = revision(t, "v1"), revision(t, "v2")
	rb.relist()
	rb.apply(v1)
	rb.runs(v1.UID)
	rb.apply(v2)
	rb.removes(v1.UID)
	rb.sync(rb.worker(v2.UID)) // started, and it crashes before the loop sees it Ready
	rb.crashes(v2.UID)
	return rb, v1, v2
}

func TestRevisionNotReadyWithinItsDeadlineIsRolledBack(t *testing.T) {
	rb, v1, v2 := v1Readyv2Crashing(t)
	rb.tick(4 * time.Second)
	rb.relist()
	if rb.worker(v2.UID).killed() {
		t.Fatal("rolled back before the deadline")
	}
	rb.tick(time.Second)
	rb.relist()
	if !rb.worker(v2.UID).killed() {
		t.Fatal("v2 still runs 5s after its start, not Ready")
	}
	if len(rb.f.byName(v1.UID)) != 0 {
		t.Fatal("v1 started before v2 was gone")
	}
	rb.removes(v2.UID)
	rb.runs(v1.UID)
	if c := rb.f.byName(v1.UID)["c/0"]; c.State != StateRunning {
		t.Fatalf("v1 after the rollback: %v, want running", rb.f.byName(v1.UID))
	}
	got := rb.rolledBack(v1.UID)
	want := "Warning revision " + revisions.Short(v2.UID) + " was not Ready within 5s of its containers starting: rolled back to revision " +
		revisions.Short(v1.UID) + ", the last that was Ready; it runs until the manifest changes"
	if len(got) != 1 || got[0] != want {
		t.Errorf("RolledBack events %q, want %q", got, want)
	}
	var served *corev1.Pod
	for _, p := range rb.r.Pods() {
		served = p
	}
	if served == nil || served.UID != v1.UID || served.Annotations[manifests.AnnotationRolledBackFrom] != string(v2.UID) {
		t.Errorf("served pods %v, want v1 annotated as rolled back from v2", rb.r.Pods())
	}
}

func TestRevisionReadyInTimeIsKept(t *testing.T) {
	rb := newRollbacks(t)
	v1, v2 := revision(t, "v1"), revision(t, "v2")
	rb.relist()
	rb.apply(v1)
	rb.runs(v1.UID)
	rb.edit(v1.UID, v2)
	rb.tick(time.Minute)
	rb.relist()
	if rb.worker(v2.UID).killed() || len(rb.rolledBack(v1.UID)) != 0 {
		t.Fatal("a revision Ready in time was rolled back")
	}
	if kept, _ := rb.r.opts.Revisions.Kept("default/web-n"); kept == nil || kept.UID != v2.UID {
		t.Errorf("kept %v, want v2: the revision Ready last", kept)
	}
}

func TestRevisionWithNoEarlierReadyOneIsNotRolledBack(t *testing.T) {
	rb := newRollbacks(t)
	v1, v2 := revision(t, "v1"), revision(t, "v2")
	rb.relist()
	rb.apply(v1)
	rb.sync(rb.worker(v1.UID))
	rb.crashes(v1.UID) // never Ready
	rb.relist()
	rb.apply(v2)
	rb.removes(v1.UID)
	rb.sync(rb.worker(v2.UID))
	rb.crashes(v2.UID)
	rb.tick(time.Minute)
	rb.relist()
	if rb.worker(v2.UID).killed() {
		t.Fatal("a pod with no earlier Ready revision was rolled back")
	}
}

func TestRolledBackPodStaysUntilItsManifestChanges(t *testing.T) {
	rb, v1, v2 := v1Readyv2Crashing(t)
	rb.tick(5 * time.Second)
	rb.relist()
	rb.removes(v2.UID)
	rb.runs(v1.UID)
	rb.apply(v2) // the source says the same again (a URL polled)
	for range 3 {
		rb.tick(time.Minute)
		rb.relist()
	}
	if w := rb.spawned[len(rb.spawned)-1]; w.uid != v1.UID || w.killed() || rb.l.workers[v2.UID] != nil {
		t.Fatalf("after the same manifest again: last worker %s (killed %v), want v1 running alone", w.uid, w.killed())
	}
	if n := len(rb.rolledBack(v1.UID)); n != 1 {
		t.Errorf("%d RolledBack events, want 1: a rollback is not retried", n)
	}

	v3 := revision(t, "v3")
	rb.edit(v1.UID, v3)
	if c := rb.f.byName(v3.UID)["c/0"]; c.State != StateRunning || rb.worker(v3.UID).killed() {
		t.Fatalf("the later edit v3: %v, want running", rb.f.byName(v3.UID))
	}
	if served := rb.r.Pods(); len(served) != 1 || served[0].Annotations[manifests.AnnotationRolledBackFrom] != "" {
		t.Errorf("served %v, want v3 with no rollback", served)
	}
}

func TestRollbackSurvivesARestartOfTheRunner(t *testing.T) {
	for _, tt := range []struct {
		name  string
		after bool // restarted after the rollback ran, else right after it was decided
	}{{"after", true}, {"during", false}} {
		t.Run(tt.name, func(t *testing.T) {
			rb, v1, v2 := v1Readyv2Crashing(t)
			rb.tick(5 * time.Second)
			rb.relist()
			if tt.after {
				rb.removes(v2.UID)
				rb.runs(v1.UID)
			}
			stops := rb.f.count("StopContainer")
			rb.restartOn(rb.f) // kill -9: the runtime keeps what runs
			rb.apply(v2)       // the source still asks for v2
			rb.relist()
			if rb.l.workers[v2.UID] != nil {
				rb.removes(v2.UID) // what runs of v2 goes first
			}
			rb.runs(v1.UID)
			if w := rb.worker(v1.UID); w.killed() || rb.l.workers[v2.UID] != nil {
				t.Fatalf("after a restart: workers %v, want v1's alone", rb.l.workers)
			}
			if n := rb.f.count("StopContainer") - stops; tt.after && n != 0 {
				t.Errorf("%d containers stopped after the restart, want none: v1 is adopted", n)
			}
			for _, c := range rb.f.byName(v2.UID) {
				if c.State == StateRunning {
					t.Errorf("v2 runs after the restart: %v", c)
				}
			}
			if c := rb.f.byName(v1.UID); len(c) == 0 {
				t.Errorf("v1 does not run after the restart")
			}
		})
	}
}

// A revision Ready a moment before an edit, with no relist between, was Ready all the
// same: the edited revision is rolled back to it.
func TestRevisionReadyJustBeforeAnEditIsKept(t *testing.T) {
	rb := newRollbacks(t)
	v1, v2 := revision(t, "v1"), revision(t, "v2")
	rb.relist()
	rb.apply(v1)
	rb.sync(rb.worker(v1.UID))
	rb.sync(rb.worker(v1.UID)) // publishes Ready; the loop relists no more before the edit
	rb.apply(v2)
	rb.removes(v1.UID)
	rb.sync(rb.worker(v2.UID))
	rb.crashes(v2.UID)
	rb.tick(5 * time.Second)
	rb.relist()
	if !rb.worker(v2.UID).killed() {
		t.Fatal("v2 was not rolled back to v1, Ready just before the edit")
	}
}

// A pod removed leaves nothing to go back to: written again later, its name starts
// afresh.
func TestRemovedPodForgetsItsReadyRevision(t *testing.T) {
	rb := newRollbacks(t)
	v1 := revision(t, "v1")
	rb.relist()
	rb.apply(v1)
	rb.runs(v1.UID)
	if _, ok := rb.r.opts.Revisions.Kept("default/web-n"); !ok {
		t.Fatal("v1 Ready was not kept")
	}
	rb.apply()
	rb.removes(v1.UID)
	if _, ok := rb.r.opts.Revisions.Kept("default/web-n"); ok {
		t.Error("a removed pod's Ready revision is still kept")
	}
}
