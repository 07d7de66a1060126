package containerdrt

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// A shim is ended only when it looks lost at two looks in a row, and never while this
// process creates a task for its container or while containerd lists a task and a
// record for it.
func TestLostShimsAreConfirmedAtASecondLook(t *testing.T) {
	proc := t.TempDir()
	shim := func(pid int, id string) {
		dir := filepath.Join(proc, strconv.Itoa(pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmdline := "/usr/bin/containerd-shim-runc-v2\x00-namespace\x00ns\x00-id\x00" + id + "\x00-address\x00/run/c.sock\x00"
		if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmdline), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shim(10, "served")    // a task and a record
	shim(11, "lost")      // a record, no task
	shim(12, "creating")  // no task yet: this process creates it
	shim(13, "orphan")    // a task, no record
	shim(14, "group")     // cleared: serves others of its group
	shim(15, "appearing") // lost at the second look only
	l := newLostShims(proc)
	l.period = 0
	records := map[string]bool{"served": true, "lost": true, "creating": true, "group": true, "appearing": true}
	procs := map[string]*task.Process{"served": {}, "orphan": {}, "group": {}, "appearing": {}}
	done := l.creatingTask("creating")
	l.clear(14)

	if lost := l.confirm("/run/c.sock", "ns", records, procs); len(lost) != 0 {
		t.Fatalf("first look: %v lost, want none before a second look", lost)
	}
	delete(procs, "appearing")
	lost := l.confirm("/run/c.sock", "ns", records, procs)
	slices.SortFunc(lost, func(a, b shimProc) int { return a.PID - b.PID })
	if want := []shimProc{{11, "lost"}, {13, "orphan"}}; !slices.Equal(lost, want) {
		t.Fatalf("second look: %v lost, want %v", lost, want)
	}
	if lost := l.confirm("/run/c.sock", "ns", records, procs); !slices.Equal(lost, []shimProc{{11, "lost"}, {13, "orphan"}, {15, "appearing"}}) {
		t.Fatalf("third look: %v lost, want the same two and the one lost since the second", lost)
	}
	done()
	if lost := l.confirm("/run/c.sock", "ns", records, procs); slices.Contains(lost, shimProc{12, "creating"}) {
		t.Fatalf("a shim whose task creation just ended was taken for lost at once: %v", lost)
	}
	l.period = time.Hour
	if lost := l.confirm("/run/c.sock", "ns", records, procs); lost != nil {
		t.Fatalf("a look before the period ended: %v", lost)
	}
}

func TestListeningSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := net.Dial("unix", path) // a connected socket beside it is not the one
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := listeningSocket("/proc", os.Getpid())
	if err != nil || got != path {
		t.Fatalf("listeningSocket = %q, %v; want %q", got, err, path)
	}
}

// The two ways containerd loses track of a container its shim still serves, each
// made for real: its record removed while its task runs (a creation that finished
// after the next staticpod removed a container it took for never started), and its
// task forgotten by containerd (a creation containerd cleaned up after its client
// died, while the shim finished it). List ends both in their shims, which exit, and
// leaves a healthy container alone.
func TestLostShimsAreEnded(t *testing.T) {
	d := testenv.Start(t) // restarted below
	r := newTestRuntimeOn(t, d)
	t.Cleanup(func() { killShimsOf("/proc", r.cfg.Address, r.cfg.Namespace) }) // after a failure
	r.lost.period = 100 * time.Millisecond
	run := func(name string) runner.Container {
		pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+name+"}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
		c := r.mustRunPod(t, pod)["c"]
		return r.awaitState(t, c.ID, runner.StateRunning)
	}
	healthy, unrecorded, forgotten := run("healthy"), run("unrecorded"), run("forgotten")
	shims := map[string]int{}
	for _, s := range findShims("/proc", r.cfg.Address, r.cfg.Namespace) {
		shims[s.ID] = s.PID
	}
	for _, c := range []runner.Container{healthy, unrecorded, forgotten} {
		if shims[c.ID] == 0 {
			t.Fatalf("no shim for %s among %v", c.ID, shims)
		}
		t.Cleanup(func() { syscall.Kill(int(c.PID), syscall.SIGKILL) }) // if all else failed
	}

	// containerd restarted without the task's bundle: it no longer knows the shim.
	if err := d.Halt(); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(d.State(), "io.containerd.runtime.v2.task", r.cfg.Namespace, forgotten.ID)
	syscall.Unmount(filepath.Join(bundle, "rootfs"), syscall.MNT_DETACH)
	if err := os.RemoveAll(bundle); err != nil {
		t.Fatal(err)
	}
	if err := d.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	testenv.Await(t, "List to reconnect", 30*time.Second, func() bool {
		_, err := r.List(r.ctx)
		return err == nil
	})
	if err := d.Client.ContainerService().Delete(r.ctx, unrecorded.ID); err != nil {
		t.Fatal(err)
	}
	resp, err := d.Client.TaskService().List(namespaces.WithNamespace(r.ctx, r.cfg.Namespace), &tasks.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, p := range resp.Tasks {
		listed[p.ID] = true
	}
	if listed[forgotten.ID] || !listed[unrecorded.ID] {
		t.Fatalf("containerd lists tasks %v: want %s's, not %s's", listed, unrecorded.ID, forgotten.ID)
	}

	for _, c := range []runner.Container{unrecorded, forgotten} {
		testenv.Await(t, "the shim and the process of "+c.ID+" gone", 30*time.Second, func() bool {
			if _, err := r.List(r.ctx); err != nil {
				t.Fatal(err)
			}
			return !alive(shims[c.ID]) && !alive(int(c.PID))
		})
	}
	if _, err := r.List(r.ctx); err != nil {
		t.Fatal(err)
	}
	if !alive(shims[healthy.ID]) || !alive(int(healthy.PID)) {
		t.Fatalf("the healthy container's shim %d or process %d is gone", shims[healthy.ID], healthy.PID)
	}
	if got, _ := r.find(t, healthy.ID); got.State != runner.StateRunning {
		t.Fatalf("the healthy container is %s, want running", got.State)
	}
}
