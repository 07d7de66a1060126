package shims

import (
	"sync"
	"time"

	"github.com/containerd/containerd/api/types/task"

	"github.com/staticpod/staticpod/internal/proc"
)

// How often the repairs look for shims containerd has lost track of. Looking reads the
// command line of every process and checks each shim and log writer (60 ms of CPU at
// 100 pods), so they look every lostShimLook only for lostShimWatch after what leaves
// such shims: its start (the staticpod before it may have been killed creating a
// task), a task creation that failed, and a containerd that did not answer; else every
// lostShimRareLook. A shim is ended at the second look that finds it lost, so never
// before lostShimLook: no task creation containerd is still busy with is taken for a
// lost one.
//
// The first look comes lostShimFirst after the start, not at the first repair: every
// pod waits for that repair, and a look then could end nothing before the second one
// anyway. At 100 pods, the look in it had a restarted staticpod report them running 21
// ms later than the code before (median of 10 restarts each, interleaved).
const (
	lostShimLook     = 5 * time.Second
	lostShimWatch    = 30 * time.Second
	lostShimRareLook = 10 * time.Minute
	lostShimFirst    = time.Second
)

// Lost finds the shims of the namespace that serve a container containerd has lost
// track of, so that the repairs end that container in them and they exit.
//
// A staticpod killed while containerd creates a task for it leaves such a shim now and
// then: containerd sees the request cancelled, cleans up and forgets the shim, while
// the shim finishes creating the container and, serving it, never exits. It keeps the
// container's log writer too. containerd lists no task for that container (or, when
// the creation won the race, lists one whose container record the next staticpod
// removed as never started), so nothing would ever delete it.
type Lost struct {
	ProcRoot string        // /proc, or a test's
	Period   time.Duration // between looks while watching: lostShimLook, or a test's (before the first look)

	mu       sync.Mutex     // guards what follows
	creating map[string]int // container ID -> task creations under way in this process
	suspects map[int]string // shim PID -> the container it was started for, lost at the last look
	cleared  map[int]bool   // shims that no longer serve the container they were started for
	stale    map[int]bool   // log writers that looked stale at the last look
	last     time.Time      // the last look
	until    time.Time      // looks are every period until then, every lostShimRareLook after
}

// NewLost watches from the start (see lostShimLook), and looks first lostShimFirst
// after it.
func NewLost(procRoot string) *Lost {
	l := &Lost{ProcRoot: procRoot, Period: lostShimLook, creating: map[string]int{}, suspects: map[int]string{}, cleared: map[int]bool{}, stale: map[int]bool{}}
	l.last = time.Now().Add(lostShimFirst - lostShimLook) // as if looked at long enough ago
	l.Watch()
	return l
}

// Watch has the repairs look every period for the next lostShimWatch.
func (l *Lost) Watch() {
	l.mu.Lock()
	l.until = time.Now().Add(lostShimWatch)
	l.mu.Unlock()
}

// CreatingTask marks a task creation for container id under way until the returned
// function is called: its shim may not be listed by containerd yet.
func (l *Lost) CreatingTask(id string) func() {
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

// Creating reports whether a task of container id is being created in this process
// (CreatingTask).
func (l *Lost) Creating(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.creating[id] > 0
}

// Confirm returns the shims that look lost now and looked lost at the previous look,
// and the log writers that look stale now and did then, at most once a period. A shim
// looks lost when containerd lists no task for the container it was started for, or
// that container has no record in records. A log writer looks stale when its shim
// started a newer one for the same log file: the first of two creations of a task in
// one shim, the one whose client was killed, leaves its log writer behind in the shim
// (seen on containerd 2.4), waiting for output that never comes.
func (l *Lost) Confirm(address, ns, helper string, records map[string]bool, procs map[string]*task.Process) ([]Proc, []LogWriter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	period := l.Period
	if time.Now().After(l.until) && len(l.suspects)+len(l.stale) == 0 {
		period = lostShimRareLook // nothing to confirm: only a safety net
	}
	if time.Since(l.last) < period {
		return nil, nil
	}
	l.last = time.Now()
	shims, loggers := scan(l.ProcRoot, address, ns, helper)
	suspects, cleared := map[int]string{}, map[int]bool{}
	var lost []Proc
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
	newest := map[logFile]LogWriter{}
	for _, lg := range loggers {
		k := logFile{lg.Shim, lg.Config}
		if n, ok := newest[k]; !ok || lg.Start > n.Start || lg.Start == n.Start && lg.PID > n.PID {
			newest[k] = lg
		}
	}
	staleNow := map[int]bool{}
	var stale []LogWriter
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

// Clear records that shim pid does not serve the container it was started for: a
// shim of a group serves others after that one went (containerdrt's shimGroup).
func (l *Lost) Clear(pid int) {
	l.mu.Lock()
	l.cleared[pid] = true
	l.mu.Unlock()
}

// LogWritersOnly returns the children of process pid under procRoot when every one of
// them is a log writer of staticpod's (root's, in the host's root directory, running
// helper); not ok when another runs there, or when that cannot be told.
func LogWritersOnly(procRoot string, pid int, helper string) ([]LogWriter, bool) {
	children, err := proc.Children(procRoot, pid)
	if err != nil {
		return nil, false
	}
	var writers []LogWriter
	for _, c := range children {
		parent, start, ok := parentAndStart(procRoot, c)
		if !ok || parent != pid || !hostRootProcess(procRoot, c) || !trustedLogWriter(procRoot, c, helper) {
			return nil, false
		}
		writers = append(writers, LogWriter{PID: c, Shim: pid, Start: start})
	}
	return writers, true
}

// HasChildren reports whether process pid has child processes (or whether that cannot
// be told).
func HasChildren(procRoot string, pid int) bool {
	children, err := proc.Children(procRoot, pid)
	return err != nil || len(children) > 0
}

// LastLook returns when the repairs last looked for lost shims.
func (l *Lost) LastLook() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}
