package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v2"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/staticpod/staticpod/internal/proc"
)

// How often the repairs look for shims containerd has lost track of. Looking reads the
// command line of every process (6 ms at 100 pods), so they look every lostShimLook
// only for lostShimWatch after what leaves such shims: its start (the staticpod before
// it may have been killed creating a task), a task creation that failed, and a
// containerd that did not answer; else every lostShimRareLook. A shim is ended at the
// second look that finds it lost, so never before lostShimLook: no task creation
// containerd is still busy with is taken for a lost one.
const (
	lostShimLook     = 5 * time.Second
	lostShimWatch    = 30 * time.Second
	lostShimRareLook = 10 * time.Minute
)

// shimAnswer is how long a shim has to answer whether it serves a container.
const shimAnswer = 5 * time.Second

// shimServices are the names of the task API a shim serves: containerd 2.x's shims
// serve v3, 1.x's v2. Their messages are the same.
var shimServices = []string{"containerd.task.v3.Task", "containerd.task.v2.Task"}

// lostShims finds the shims of the namespace that serve a container containerd has
// lost track of, and ends that container in them, so that they exit.
//
// A staticpod killed while containerd creates a task for it leaves such a shim now and
// then: containerd sees the request cancelled, cleans up and forgets the shim, while
// the shim finishes creating the container and, serving it, never exits. It keeps the
// container's log writer too. containerd lists no task for that container (or, when
// the creation won the race, lists one whose container record the next staticpod
// removed as never started), so nothing would ever delete it.
type lostShims struct {
	procRoot string        // /proc, or a test's
	period   time.Duration // between looks while watching: lostShimLook, or a test's

	busy atomic.Bool    // an ending runs (endLostShims)
	wg   sync.WaitGroup // the ending that runs

	mu       sync.Mutex
	creating map[string]int // container ID -> task creations under way in this process
	suspects map[int]string // shim PID -> the container it was started for, lost at the last look
	cleared  map[int]bool   // shims that no longer serve the container they were started for
	stale    map[int]bool   // log writers that looked stale at the last look
	last     time.Time      // the last look
	until    time.Time      // looks are every period until then, every lostShimRareLook after
}

// newLostShims watches from the start (see lostShimLook).
func newLostShims(procRoot string) *lostShims {
	l := &lostShims{procRoot: procRoot, period: lostShimLook, creating: map[string]int{}, suspects: map[int]string{}, cleared: map[int]bool{}, stale: map[int]bool{}}
	l.watch()
	return l
}

// watch has the repairs look every period for the next lostShimWatch.
func (l *lostShims) watch() {
	l.mu.Lock()
	l.until = time.Now().Add(lostShimWatch)
	l.mu.Unlock()
}

// creatingTask marks a task creation for container id under way until the returned
// function is called: its shim may not be listed by containerd yet.
func (l *lostShims) creatingTask(id string) func() {
	l.mu.Lock()
	l.creating[id]++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		if l.creating[id]--; l.creating[id] <= 0 {
			delete(l.creating, id)
		}
		l.mu.Unlock()
	}
}

// confirm returns the shims that look lost now and looked lost at the previous look,
// and the log writers that look stale now and did then, at most once a period. A shim
// looks lost when containerd lists no task for the container it was started for, or
// that container has no record in records. A log writer looks stale when its shim
// started a newer one for the same log file: the first of two creations of a task in
// one shim, the one whose client was killed, leaves its log writer behind in the shim
// (seen on containerd 2.4), waiting for output that never comes.
func (l *lostShims) confirm(address, ns, helper string, records map[string]bool, procs map[string]*task.Process) ([]shimProc, []loggerProc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	period := l.period
	if time.Now().After(l.until) && len(l.suspects)+len(l.stale) == 0 {
		period = lostShimRareLook // nothing to confirm: only a safety net
	}
	if time.Since(l.last) < period {
		return nil, nil
	}
	l.last = time.Now()
	shims, loggers := scanShims(l.procRoot, address, ns, helper)
	suspects, cleared := map[int]string{}, map[int]bool{}
	var lost []shimProc
	for _, s := range shims {
		switch {
		case l.cleared[s.PID]:
			cleared[s.PID] = true
		case s.ID == "" || l.creating[s.ID] > 0 || records[s.ID] && procs[s.ID] != nil:
		case l.suspects[s.PID] == s.ID:
			lost = append(lost, s)
			suspects[s.PID] = s.ID // until it is gone: an end that failed is tried again
		default:
			suspects[s.PID] = s.ID
		}
	}
	type logFile struct {
		shim   int
		config string
	}
	newest := map[logFile]loggerProc{}
	for _, lg := range loggers {
		k := logFile{lg.Shim, lg.Config}
		if n, ok := newest[k]; !ok || lg.Start > n.Start || lg.Start == n.Start && lg.PID > n.PID {
			newest[k] = lg
		}
	}
	staleNow := map[int]bool{}
	var stale []loggerProc
	for _, lg := range loggers {
		if newest[logFile{lg.Shim, lg.Config}].PID == lg.PID {
			continue
		}
		if l.stale[lg.PID] {
			stale = append(stale, lg)
		}
		staleNow[lg.PID] = true
	}
	l.suspects, l.cleared, l.stale = suspects, cleared, staleNow
	return lost, stale
}

// clear records that shim pid does not serve the container it was started for: a
// shim of a group serves others after that one went (see shimGroup).
func (l *lostShims) clear(pid int) {
	l.mu.Lock()
	l.cleared[pid] = true
	l.mu.Unlock()
}

// endLostShims ends, in their shims, the containers containerd lost track of (see
// lostShims), and the log writers interrupted task creations left (see confirm).
// records are the container records List read, procs the tasks it listed. The ending
// goes on in the background, one at a time, so that a shim that does not answer holds
// up no relist; Close waits for it. Failures are logged; the next look tries again.
func (rp *repairer) endLostShims(ctx context.Context, records map[string]bool, procs map[string]*task.Process) {
	lost, stale := rp.lost.confirm(rp.rt.cfg.Address, rp.rt.cfg.Namespace, rp.rt.cfg.Self, records, procs)
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
			if signalProcess(rp.lost.procRoot, lg.PID, lg.Start, syscall.SIGTERM) == nil {
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
func (rp *repairer) endLostShim(ctx context.Context, s shimProc, listed bool) {
	if listed {
		cctx, cancel := rp.rt.call(ctx)
		_, err := rp.rt.client.ContainerService().Get(cctx, s.ID)
		cancel()
		if !isNotFound(err) {
			return // made since List read the records, or containerd did not answer
		}
	}
	served, err := endShimContainer(ctx, rp.lost.procRoot, runcRoot, rp.rt.cfg.Namespace, s)
	switch {
	case errors.Is(err, errOtherProcess):
		// The shim exited since it was looked at: nothing to end.
	case errors.Is(err, errShimSilent) && !hasChildren(rp.lost.procRoot, s.PID):
		// Stuck before it serves anything (containerd 2.x leaves one blocked opening its
		// log pipe in a bundle it removed): nothing runs under it.
		if signalProcess(rp.lost.procRoot, s.PID, s.Start, syscall.SIGKILL) == nil {
			rp.rt.log.Warn("killed a shim containerd had lost track of, which answered nothing and ran nothing", "id", s.ID, "shim", s.PID)
		}
	case errors.Is(err, errNoRuncState):
		// It counts a container runc never had. Its children, if any, must all be its
		// log writers (the shim starts them before runc creates anything): then nothing
		// of a container runs under it, and it and they are ended. Anything else under
		// it is left, and reported.
		writers, ok := logWritersOnly(rp.lost.procRoot, s.PID, rp.rt.cfg.Self)
		if !ok {
			rp.rt.log.Warn("end a container containerd lost track of in its shim", "id", s.ID, "shim", s.PID, "err", err)
			return
		}
		if signalProcess(rp.lost.procRoot, s.PID, s.Start, syscall.SIGKILL) == nil {
			for _, w := range writers { // they drain what is left, if anything, then exit
				signalProcess(rp.lost.procRoot, w.PID, w.Start, syscall.SIGTERM)
			}
			rp.rt.log.Warn("killed a shim containerd had lost track of, whose container runc never made, and which ran nothing but its log writers", "id", s.ID, "shim", s.PID, "log-writers", len(writers))
		}
	case err != nil:
		rp.rt.log.Warn("end a container containerd lost track of in its shim", "id", s.ID, "shim", s.PID, "err", err)
	case !served:
		rp.lost.clear(s.PID)
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

// logWritersOnly returns the children of process pid under procRoot when every one of
// them is a log writer of staticpod's (root's, in the host's root directory, running
// helper); not ok when another runs there, or when that cannot be told.
func logWritersOnly(procRoot string, pid int, helper string) ([]loggerProc, bool) {
	children, err := proc.Children(procRoot, pid)
	if err != nil {
		return nil, false
	}
	var writers []loggerProc
	for _, c := range children {
		parent, start, ok := parentAndStart(procRoot, c)
		if !ok || parent != pid || !hostRootProcess(procRoot, c) || !trustedLogWriter(procRoot, c, helper) {
			return nil, false
		}
		writers = append(writers, loggerProc{PID: c, Shim: pid, Start: start})
	}
	return writers, true
}

// hasChildren reports whether process pid has child processes (or whether that cannot
// be told).
func hasChildren(procRoot string, pid int) bool {
	children, err := proc.Children(procRoot, pid)
	return err != nil || len(children) > 0
}

// endShimContainer asks shim s whether it serves the container it was started for and,
// if it does, kills that container's processes, deletes it and asks the shim to shut
// down, which it does once it serves nothing else. It reports whether the shim served
// the container. runcRoot is where runc keeps its state (see restoreBundle).
func endShimContainer(ctx context.Context, procRoot, runcRoot, ns string, s shimProc) (bool, error) {
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
	done, err := restoreBundle(runcRoot, ns, s.ID)
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
// is not found, errShimSilent when no socket answers at all, errOtherProcess when the
// PID no longer names the shim looked at (its sockets would be another process's).
func dialShim(ctx context.Context, procRoot string, s shimProc) (*ttrpc.Client, string, error) {
	sockets, err := proc.ListeningUnixSockets(procRoot, s.PID)
	if err != nil {
		return nil, "", err
	}
	// The sockets are the shim's only if its PID still names it.
	if _, start, ok := parentAndStart(procRoot, s.PID); !ok || start != s.Start {
		return nil, "", fmt.Errorf("shim %d: %w", s.PID, errOtherProcess)
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

// restoreBundle makes the bundle directory of container id of namespace ns again if it
// is gone, empty, until the returned function is called. Its path is the one runc was
// given for the container (its state under runcRoot names it), checked to be
// <state>/io.containerd.runtime.v2.task/<ns>/<id>; it is made and removed in that
// directory, opened without following symlinks (openBundleDir). Nothing of the shim
// process (its working directory, its flags) names it: anyone can fake those.
func restoreBundle(runcRoot, ns, id string) (func(), error) {
	bundle, err := runcBundle(runcRoot, ns, id)
	if err != nil {
		return nil, fmt.Errorf("find the bundle of container %s: %w", id, err)
	}
	dir, err := openBundleDir(bundle, ns, id)
	if err != nil {
		return nil, err
	}
	made, err := dir.restore(id)
	if err != nil || !made {
		dir.Close()
		return func() {}, err
	}
	return func() {
		dir.remove(id)
		dir.Close()
	}, nil
}
