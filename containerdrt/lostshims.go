package containerdrt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v2"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// lostShimLook is how often List looks for shims containerd has lost track of. A shim
// is ended at the second look that finds it lost, so never before this long: no task
// creation containerd is still busy with is taken for a lost one.
const lostShimLook = 5 * time.Second

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
	period   time.Duration // between looks: lostShimLook, or a test's

	mu       sync.Mutex
	creating map[string]int // container ID -> task creations under way in this process
	suspects map[int]string // shim PID -> the container it was started for, lost at the last look
	cleared  map[int]bool   // shims that no longer serve the container they were started for
	last     time.Time      // the last look
}

func newLostShims(procRoot string) *lostShims {
	return &lostShims{procRoot: procRoot, period: lostShimLook, creating: map[string]int{}, suspects: map[int]string{}, cleared: map[int]bool{}}
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
// at most once a period. A shim looks lost when containerd lists no task for
// the container it was started for, or that container has no record in records.
func (l *lostShims) confirm(address, ns string, records map[string]bool, procs map[string]*task.Process) []shimProc {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.last) < l.period {
		return nil
	}
	l.last = time.Now()
	shims := findShims(l.procRoot, address, ns)
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
	l.suspects, l.cleared = suspects, cleared
	return lost
}

// clear records that shim pid does not serve the container it was started for: a
// shim of a group serves others after that one went (see shimGroup).
func (l *lostShims) clear(pid int) {
	l.mu.Lock()
	l.cleared[pid] = true
	l.mu.Unlock()
}

// endLostShims ends, in their shims, the containers containerd lost track of (see
// lostShims). records are the container records List read, procs the tasks it listed.
// A record that List may have read before the container was made is looked up again
// first. Failures are logged; the next look tries again.
func (r *Runtime) endLostShims(ctx context.Context, records map[string]bool, procs map[string]*task.Process) {
	for _, s := range r.lost.confirm(r.cfg.Address, r.cfg.Namespace, records, procs) {
		if procs[s.ID] != nil {
			if _, err := r.client.ContainerService().Get(ctx, s.ID); !isNotFound(err) {
				continue // made since List read the records, or containerd did not answer
			}
		}
		served, err := endShimContainer(ctx, r.lost.procRoot, s)
		switch {
		case err != nil:
			r.log.Warn("end a container containerd lost track of in its shim", "id", s.ID, "shim", s.PID, "err", err)
		case !served:
			r.lost.clear(s.PID)
		default:
			r.log.Warn("ended a container containerd had lost track of, and its shim", "id", s.ID, "shim", s.PID)
		}
	}
}

// endShimContainer asks shim s whether it serves the container it was started for and,
// if it does, kills that container's processes, deletes it and asks the shim to shut
// down, which it does once it serves nothing else. It reports whether the shim served
// the container.
func endShimContainer(ctx context.Context, procRoot string, s shimProc) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	socket, err := listeningSocket(procRoot, s.PID)
	if err != nil {
		return false, err
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
	if err != nil {
		return false, fmt.Errorf("connect to shim %d at %s: %w", s.PID, socket, err)
	}
	c := ttrpc.NewClient(conn)
	defer c.Close()
	service := ""
	for _, name := range shimServices {
		err = c.Call(ctx, name, "Connect", &taskapi.ConnectRequest{ID: s.ID}, &taskapi.ConnectResponse{})
		if status.Code(err) != codes.Unimplemented {
			service = name
			break
		}
	}
	switch {
	case isNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("ask shim %d for container %s: %w", s.PID, s.ID, err)
	}
	// runc writes its log into the task's bundle, which containerd removed when it
	// forgot the task: without it, no kill or delete would work.
	bundle, made, err := restoreBundle(procRoot, s)
	if err != nil {
		return true, err
	}
	if made {
		defer os.RemoveAll(bundle)
	}
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

// restoreBundle makes the bundle directory of shim s's container again if it is gone,
// empty, and reports whether it did. The shim runs in it: its working directory names
// it, as containerd renamed it on its way out (a dot before the container ID).
func restoreBundle(procRoot string, s shimProc) (string, bool, error) {
	cwd, err := os.Readlink(filepath.Join(procRoot, strconv.Itoa(s.PID), "cwd"))
	if err != nil {
		return "", false, fmt.Errorf("working directory of shim %d: %w", s.PID, err)
	}
	bundle := filepath.Join(filepath.Dir(strings.TrimSuffix(cwd, " (deleted)")), s.ID)
	if _, err := os.Stat(bundle); err == nil {
		return bundle, false, nil
	}
	if err := os.Mkdir(bundle, 0o700); err != nil {
		return "", false, fmt.Errorf("make the bundle of container %s again: %w", s.ID, err)
	}
	return bundle, true, nil
}

// listeningSocket returns the path of the unix socket process pid listens on, found
// from its descriptors and its network namespace's table of unix sockets under
// procRoot. A shim listens on one: its task API.
func listeningSocket(procRoot string, pid int) (string, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return "", fmt.Errorf("descriptors of shim %d: %w", pid, err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	f, err := os.Open(filepath.Join(dir, "net", "unix"))
	if err != nil {
		return "", fmt.Errorf("unix sockets of shim %d: %w", pid, err)
	}
	defer f.Close()
	// Num RefCount Protocol Flags Type St Inode Path; a listening socket has the flag
	// __SO_ACCEPTCON (00010000) and state 01 (unconnected).
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 8 && fields[3] == "00010000" && fields[5] == "01" && inodes[fields[6]] {
			return fields[7], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("unix sockets of shim %d: %w", pid, err)
	}
	return "", errors.New("shim " + strconv.Itoa(pid) + " listens on no unix socket")
}
