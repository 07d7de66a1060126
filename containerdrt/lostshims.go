package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v2"
	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/internal/proc"
)

// shimAnswer is how long a shim has to answer whether it serves a container.
const shimAnswer = 5 * time.Second

// shimServices are the names of the task API a shim serves: containerd 2.x's shims
// serve v3, 1.x's v2. Their messages are the same.
var shimServices = []string{"containerd.task.v3.Task", "containerd.task.v2.Task"}

// lostShims ends, in their shims, the containers containerd lost track of that
// shims.Lost confirms, and the log writers interrupted task creations left: in the
// background, one ending at a time (see endLostShims).
type lostShims struct {
	*shims.Lost

	busy atomic.Bool    // an ending runs (endLostShims)
	wg   sync.WaitGroup // the ending that runs
}

// newLostShims watches from the start (see shims.NewLost).
func newLostShims(procRoot string) *lostShims {
	return &lostShims{Lost: shims.NewLost(procRoot)}
}

// endLostShims ends, in their shims, the containers containerd lost track of (see
// shims.Lost), and the log writers interrupted task creations left (see its Confirm).
// records are the container records List read, procs the tasks it listed. The ending
// goes on in the background, one at a time, so that a shim that does not answer holds
// up no relist; Close waits for it. Failures are logged; the next look tries again.
func (rp *repairer) endLostShims(ctx context.Context, records map[string]bool, procs map[string]*task.Process) {
	lost, stale := rp.lost.Confirm(rp.rt.cfg.Address, rp.rt.cfg.Namespace, rp.rt.cfg.Self, records, procs)
	if len(lost)+len(stale) == 0 || !rp.lost.busy.CompareAndSwap(false, true) {
		return
	}
	ctx = context.WithoutCancel(ctx) // the repair's own ends as it returns
	rp.lost.wg.Add(1)
	go func() {
		defer rp.lost.wg.Done()
		defer rp.lost.busy.Store(false)
		for _, lg := range stale {
			// It drains what is left, if anything, then exits (logs.RunShimLogger).
			if shims.Signal(rp.lost.ProcRoot, lg.PID, lg.Start, syscall.SIGTERM) == nil {
				rp.rt.log.Warn("ended a log writer an interrupted task creation left in its shim", "pid", lg.PID, "shim", lg.Shim)
			}
		}
		for _, s := range lost {
			rp.endLostShim(ctx, s, procs[s.ID] != nil)
		}
	}()
}

// endLostShim ends container s.ID in shim s, after checking that containerd has no
// record of it when it lists a task for it (List may have read the records before the
// container was made).
func (rp *repairer) endLostShim(ctx context.Context, s shims.Proc, listed bool) {
	if listed {
		cctx, cancel := rp.rt.call(ctx)
		_, err := rp.rt.client.ContainerService().Get(cctx, s.ID)
		cancel()
		if !isNotFound(err) {
			return // made since List read the records, or containerd did not answer
		}
	}
	served, err := endShimContainer(ctx, rp.lost.ProcRoot, shims.RuncRoot, rp.rt.cfg.Namespace, s)
	switch {
	case errors.Is(err, shims.ErrOtherProcess):
		// The shim exited since it was looked at: nothing to end.
	case errors.Is(err, errShimSilent) && !shims.HasChildren(rp.lost.ProcRoot, s.PID):
		// Stuck before it serves anything (containerd 2.x leaves one blocked opening its
		// log pipe in a bundle it removed): nothing runs under it.
		if shims.Signal(rp.lost.ProcRoot, s.PID, s.Start, syscall.SIGKILL) == nil {
			rp.rt.log.Warn("killed a shim containerd had lost track of, which answered nothing and ran nothing", "id", s.ID, "shim", s.PID)
		}
	case errors.Is(err, errNoRuncState):
		// It counts a container runc never had. Its children, if any, must all be its
		// log writers (the shim starts them before runc creates anything): then nothing
		// of a container runs under it, and it and they are ended. Anything else under
		// it is left, and reported.
		writers, ok := shims.LogWritersOnly(rp.lost.ProcRoot, s.PID, rp.rt.cfg.Self)
		if !ok {
			rp.rt.log.Warn("end a container containerd lost track of in its shim", "id", s.ID, "shim", s.PID, "err", err)
			return
		}
		if shims.Signal(rp.lost.ProcRoot, s.PID, s.Start, syscall.SIGKILL) == nil {
			for _, w := range writers { // they drain what is left, if anything, then exit
				shims.Signal(rp.lost.ProcRoot, w.PID, w.Start, syscall.SIGTERM)
			}
			rp.rt.log.Warn("killed a shim containerd had lost track of, whose container runc never made, and which ran nothing but its log writers", "id", s.ID, "shim", s.PID, "log-writers", len(writers))
		}
	case err != nil:
		rp.rt.log.Warn("end a container containerd lost track of in its shim", "id", s.ID, "shim", s.PID, "err", err)
	case !served:
		rp.lost.Clear(s.PID)
	default:
		rp.rt.log.Warn("ended a container containerd had lost track of, and its shim", "id", s.ID, "shim", s.PID)
	}
}

// errShimSilent is endShimContainer's error when the shim does not answer at all;
// errNoRuncState when it serves a container runc keeps no state of.
var (
	errShimSilent  = errors.New("the shim does not answer")
	errNoRuncState = errors.New("runc keeps no state of the container")
)

// endShimContainer asks shim s whether it serves the container it was started for and,
// if it does, kills that container's processes, deletes it and asks the shim to shut
// down, which it does once it serves nothing else. It reports whether the shim served
// the container. runcRoot is where runc keeps its state (see shims.RestoreBundle).
func endShimContainer(ctx context.Context, procRoot, runcRoot, ns string, s shims.Proc) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, service, err := dialShim(ctx, procRoot, s)
	switch {
	case isNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	defer c.Close()
	// runc writes its log into the task's bundle, which containerd removed when it
	// forgot the task: without it, no kill or delete would work.
	done, err := shims.RestoreBundle(runcRoot, ns, s.ID)
	if errors.Is(err, fs.ErrNotExist) {
		// runc keeps no state of the container: its creation was cut short before runc
		// made it, or runc's state went with it. Nothing of it runs in runc, and its
		// bundle cannot be told (it is never taken from the shim): the caller ends a
		// shim that runs nothing.
		return true, fmt.Errorf("%w: %w", errNoRuncState, err)
	}
	if err != nil {
		return true, err
	}
	defer done()
	// The processes may be gone already: what matters is the delete, once they are.
	c.Call(ctx, service, "Kill", &taskapi.KillRequest{ID: s.ID, Signal: uint32(syscall.SIGKILL), All: true}, &emptypb.Empty{})
	waitCtx, cancelWait := context.WithTimeout(ctx, 2*time.Second)
	c.Call(waitCtx, service, "Wait", &taskapi.WaitRequest{ID: s.ID}, &taskapi.WaitResponse{})
	cancelWait()
	err = c.Call(ctx, service, "Delete", &taskapi.DeleteRequest{ID: s.ID}, &taskapi.DeleteResponse{})
	if err != nil && !isNotFound(err) {
		return true, fmt.Errorf("delete container %s in shim %d: %w", s.ID, s.PID, convertErr(err))
	}
	// The shim exits as it answers, or refuses when it serves other containers.
	c.Call(ctx, service, "Shutdown", &taskapi.ShutdownRequest{ID: s.ID}, &emptypb.Empty{})
	return true, nil
}

// dialShim connects to the task API of shim s: to the first socket it listens on that
// answers whether the shim serves container s.ID, in one of the API's versions. It
// returns the client and the service that answered; the error is the answer's when it
// is not found, errShimSilent when no socket answers at all, shims.ErrOtherProcess when
// the PID no longer names the shim looked at (its sockets would be another process's).
func dialShim(ctx context.Context, procRoot string, s shims.Proc) (*ttrpc.Client, string, error) {
	sockets, err := proc.ListeningUnixSockets(procRoot, s.PID)
	if err != nil {
		return nil, "", err
	}
	// The sockets are the shim's only if its PID still names it.
	if st, err := proc.ReadStat(procRoot, s.PID); err != nil || st.StartTime != s.Start {
		return nil, "", fmt.Errorf("shim %d: %w", s.PID, shims.ErrOtherProcess)
	}
	for _, socket := range sockets {
		conn, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
		if err != nil {
			continue
		}
		c := ttrpc.NewClient(conn)
		for _, service := range shimServices {
			cctx, cancel := context.WithTimeout(ctx, shimAnswer)
			err = c.Call(cctx, service, "Connect", &taskapi.ConnectRequest{ID: s.ID}, &taskapi.ConnectResponse{})
			cancel()
			switch {
			case status.Code(err) == codes.Unimplemented:
				continue // the other version
			case err == nil:
				return c, service, nil
			case isNotFound(err):
				c.Close()
				return nil, "", err
			}
			break // silent, or not a task API: the next socket
		}
		c.Close()
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
	}
	return nil, "", fmt.Errorf("shim %d at %s: %w", s.PID, strings.Join(sockets, ", "), errShimSilent)
}

// clearForTask clears the way for a new task of container id after a creation failed
// with err, and reports whether trying again may succeed. A staticpod killed while
// containerd created a task for id can leave, for the next one to meet, a shim started
// for id that containerd lists no task for (see shims.Lost), stuck or serving, which
// holds the task's bundle (the creation fails with "file exists") or takes the next
// creation in and never answers it. Such a shim is ended at once, not at the repairs'
// second look: this process alone creates id's tasks (one worker a pod, and the root
// dir's lock keeps a second daemon away), and its creation has just failed, so no
// creation under way can be the shim's. Then the bundle, if it is in the way, is waited
// for, up to staleBundleWait: containerd removes it as it cleans up after the shim, or
// it is removed as one left behind (removeStaleBundle) once it has settled.
func (r *Runtime) clearForTask(ctx context.Context, id string, err error) bool {
	ended := r.repairs.endLostShimsOf(ctx, id)
	path, stale := shims.StaleBundle(err, r.cfg.Namespace, id)
	if !stale {
		// The shim the creation went into may have been ended under it, by the repairs.
		return ended || strings.Contains(err.Error(), ttrpc.ErrClosed.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, staleBundleWait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			return true
		}
		if r.removeStaleBundle(path, id) {
			r.log.Warn("removed a task bundle containerd left behind", "id", id, "path", path)
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// staleBundleWait bounds how long a creation waits for a bundle in its way to go:
// containerd's clean-up after the shim that held it, or the bundle's settling (see
// shims.RemoveStaleBundle).
const staleBundleWait = 5 * time.Second

// endLostShimsOf ends the shims started for container id that containerd lists no task
// for (see clearForTask), waits up to shimExit for them to exit, and reports whether
// it found any.
func (rp *repairer) endLostShimsOf(ctx context.Context, id string) bool {
	var found []shims.Proc
	for _, s := range shims.Find(rp.lost.ProcRoot, rp.rt.cfg.Address, rp.rt.cfg.Namespace) {
		if s.ID == id {
			found = append(found, s)
		}
	}
	if len(found) == 0 {
		return false
	}
	cctx, cancel := rp.rt.call(ctx)
	_, err := rp.rt.client.TaskService().Get(cctx, &tasks.GetRequest{ContainerID: id})
	cancel()
	if !isNotFound(err) {
		return false // containerd serves id's task through it, or did not answer
	}
	for _, s := range found {
		rp.endLostShim(ctx, s, false)
	}
	deadline := time.Now().Add(shimExit)
	for _, s := range found {
		for !shims.Gone(rp.lost.ProcRoot, s) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return true
}

// shimExit bounds how long endLostShimsOf waits for the shims it ended to exit.
const shimExit = 2 * time.Second

// removeStaleBundle removes the task bundle containerd left behind at path for
// container id, when it is one (see shims.RemoveStaleBundle), and reports whether it
// did.
func (r *Runtime) removeStaleBundle(path, id string) bool {
	removed, err := shims.RemoveStaleBundle(r.repairs.lost.ProcRoot, r.cfg.Address, r.cfg.Namespace, path, id)
	if err != nil {
		r.log.Warn("remove a task bundle containerd left behind", "id", id, "path", path, "err", err)
	}
	return removed
}
