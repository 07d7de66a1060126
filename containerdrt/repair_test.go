package containerdrt

import (
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// List only reads: with an exit not recorded, a started container whose task is gone,
// a shim containerd lost track of and an interrupted creation's snapshot present, two
// Lists report the same and leave all of them as they were, reporting what needs
// mending as Repair will leave it (the exit) or as unknown (the lost task). Repair
// then records the exit and deletes its task, records the lost task's end, ends the
// lost shim and removes the snapshot.
func TestListChangesNothingAndRepairMends(t *testing.T) {
	r := newTestRuntime(t)
	t.Cleanup(func() { shims.Kill("/proc", r.cfg.Address, r.cfg.Namespace) }) // after a failure
	run := func(name, command string) runner.Container {
		pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+name+"}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sh, -c, '"+command+"']}\n")
		return r.mustRunPod(t, pod)["c"]
	}
	exits := run("exits", "echo bye > /dev/termination-log; exit 3")
	gone := run("gone", "exec sleep 3600")
	unrecorded := run("unrecorded", "exec sleep 3600")

	ctx := r.ctx
	awaitExit := func(id string) { // as containerd tells it: no List
		c, err := r.client.LoadContainer(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		task, err := c.Task(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		exited, err := task.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		<-exited
	}
	awaitExit(exits.ID)
	c, err := r.client.LoadContainer(ctx, gone.ID)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Delete(ctx, client.WithProcessKill); err != nil { // its task vanishes, as a killed shim's does
		t.Fatal(err)
	}
	shimPID := map[string]int{}
	for _, s := range shims.Find("/proc", r.cfg.Address, r.cfg.Namespace) {
		shimPID[s.ID] = s.PID
	}
	if shimPID[unrecorded.ID] == 0 {
		t.Fatalf("no shim for %s among %v", unrecorded.ID, shimPID)
	}
	if err := r.client.ContainerService().Delete(ctx, unrecorded.ID); err != nil { // containerd forgets it
		t.Fatal(err)
	}
	lease, err := r.client.LeasesService().Create(ctx, leases.WithRandomID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.SnapshotService("overlayfs").Prepare(leases.WithLease(ctx, lease.ID), "interrupted", ""); err != nil {
		t.Fatal(err)
	}

	// A restarted staticpod: the lease predates it.
	again, err := New(ctx, r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	again.repairs.lost.Period = 0
	first, err := again.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := again.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("a second List differs (-first +second):\n%s", diff)
	}
	byID := map[string]runner.Container{}
	for _, c := range second {
		byID[c.ID] = c
	}
	if c := byID[exits.ID]; c.State != runner.StateExited || c.ExitCode != 3 || c.Reason != "Error" || c.Message != "bye\n" {
		t.Errorf("List reports the unrecorded exit %s %d %q %q, want exited 3 Error with its message", c.State, c.ExitCode, c.Reason, c.Message)
	}
	if c := byID[gone.ID]; c.State != runner.StateUnknown {
		t.Errorf("List reports the container whose task vanished %s, want unknown until its end is recorded", c.State)
	}
	recorded := func(id string) bool {
		info, err := again.client.ContainerService().Get(ctx, id)
		return err == nil && info.Labels[labelFinishedAt] != ""
	}
	hasTask := func(id string) bool {
		c, err := again.client.LoadContainer(ctx, id)
		if err != nil {
			return false
		}
		_, err = c.Task(ctx, nil)
		return err == nil
	}
	leaseLeft := func() bool {
		ls, err := again.client.LeasesService().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.ID == lease.ID {
				return true
			}
		}
		return false
	}
	if recorded(exits.ID) || !hasTask(exits.ID) || recorded(gone.ID) || !shims.Alive(shimPID[unrecorded.ID]) || !leaseLeft() {
		t.Fatalf("List changed something: exit recorded %v, task left %v, lost task's end recorded %v, lost shim alive %v, lease left %v",
			recorded(exits.ID), hasTask(exits.ID), recorded(gone.ID), shims.Alive(shimPID[unrecorded.ID]), leaseLeft())
	}

	if !again.Repair(ctx) {
		t.Error("Repair recorded exits and reported no change")
	}
	if !recorded(exits.ID) || !recorded(gone.ID) || leaseLeft() {
		t.Errorf("after Repair: exit recorded %v, lost task's end recorded %v, lease left %v; want both recorded and no lease",
			recorded(exits.ID), recorded(gone.ID), leaseLeft())
	}
	again.repairs.asideWG.Wait()
	if hasTask(exits.ID) {
		t.Error("the task of the recorded exit is left")
	}
	all, err := again.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.ID == exits.ID && (c.State != runner.StateExited || c.ExitCode != 3 || c.Message != "bye\n") {
			t.Errorf("after Repair: %s %d %q, want exited 3 with the message List read", c.State, c.ExitCode, c.Message)
		}
		if c.ID == gone.ID && (c.State != runner.StateExited || c.ExitCode != lostTaskExitCode) {
			t.Errorf("after Repair the lost task's container is %s %d, want exited %d", c.State, c.ExitCode, lostTaskExitCode)
		}
	}
	testenv.Await(t, "the lost shim ended by the second repair's look", 30*time.Second, func() bool {
		if _, err := again.relist(ctx); err != nil {
			t.Fatal(err)
		}
		again.repairs.lost.wg.Wait()
		return !shims.Alive(shimPID[unrecorded.ID])
	})
}

// A task this Runtime is starting has its start recorded by the start, once: a relist
// and repair that land between the task's start and that record leave it alone. A
// running task without a start time that nobody is starting (a staticpod stopped in
// between) gets the time of its sighting.
func TestRepairLeavesTheStartOfATaskBeingStartedToItsStart(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: starting}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	id := r.mustRunPod(t, pod)["c"].ID
	if _, err := r.setLabels(r.ctx, id, map[string]string{labelStartedAt: ""}); err != nil { // started, not yet recorded
		t.Fatal(err)
	}
	startedAt := func() string {
		info, err := r.client.ContainerService().Get(r.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return info.Labels[labelStartedAt]
	}
	repair := func() {
		if _, err := r.List(r.ctx); err != nil {
			t.Fatal(err)
		}
		r.Repair(r.ctx)
	}
	done := r.repairs.lost.CreatingTask(id)
	repair()
	if got := startedAt(); got != "" {
		t.Errorf("repair recorded start %s of a task being started, want it left to the start", got)
	}
	done()
	repair()
	if startedAt() == "" {
		t.Error("repair left a running task that nobody starts without a start time")
	}
}
