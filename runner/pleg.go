package runner

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// EventType is what changed about a container between two relists.
type EventType string

const (
	ContainerStarted EventType = "ContainerStarted"
	ContainerDied    EventType = "ContainerDied"
	ContainerRemoved EventType = "ContainerRemoved"
	ContainerChanged EventType = "ContainerChanged"
)

// Event is one change the PLEG saw.
type Event struct {
	UID         types.UID
	Type        EventType
	ContainerID string
}

// relistUnhealthy is how long the PLEG may go without a completed relist before it
// reports itself unhealthy, as the kubelet's does.
const relistUnhealthy = 3 * time.Minute

// Lister is the part of the Runtime the PLEG needs.
type Lister interface {
	List(ctx context.Context) ([]Container, error)
}

// PLEG is the pod lifecycle event generator: it relists the runtime, compares the result
// with the previous relist and reports what changed, pod by pod, and it keeps the
// latest runtime state of every pod in a cache with the time it was observed.
//
// It assumes that a container's state only changes through the transitions the runtime
// reports in List (created -> running -> exited -> removed), so two relists are enough
// to see every change that matters, even when several happen between them: the state
// compared is the latest, never a history. When List fails, the cache keeps its old
// records and the next relist compares against them again, so a failure loses no event.
type PLEG struct {
	lister Lister
	now    func() time.Time

	mu         sync.Mutex      // guards the fields below: the loop relists, workers and the API read
	last       map[string]seen // previous relist, by container ID
	pods       map[types.UID]PodRuntime
	started    uint64    // generation of the newest relist started
	cacheGen   uint64    // generation of the relist that filled the cache; 0 before the first
	lastRelist time.Time // when a relist last completed
}

// NewPLEG returns a PLEG over lister with an empty cache.
func NewPLEG(lister Lister, now func() time.Time) *PLEG {
	return &PLEG{lister: lister, now: now, last: map[string]seen{}, pods: map[types.UID]PodRuntime{}}
}

// seen is what the PLEG compares of a container from one relist to the next.
type seen struct {
	uid   types.UID
	state State
	pid   uint32
}

// Relist lists the runtime once and returns the events since the previous relist.
func (p *PLEG) Relist(ctx context.Context) ([]Event, error) {
	events, _, err := p.RelistIf(ctx, nil)
	return events, err
}

// RelistIf is Relist with keep, when set, called between the list and the cache taking
// it: when keep says no, the list is dropped and the cache stays as it was (taken
// reports which). The runner's first relist repairs so before its cache shows
// anything, and keeps that list when the repair changed nothing.
func (p *PLEG) RelistIf(ctx context.Context, keep func() bool) (events []Event, taken bool, err error) {
	p.mu.Lock()
	p.started++
	gen := p.started
	p.mu.Unlock()
	all, err := p.lister.List(ctx)
	if err != nil {
		return nil, false, err // the old records stay: the next relist retries
	}
	if keep != nil && !keep() {
		return nil, false, nil
	}
	cur := make(map[string]seen, len(all))
	for _, c := range all {
		cur[c.ID] = seen{c.PodUID, c.State, c.PID}
	}
	pods := byPod(all)
	p.mu.Lock()
	defer p.mu.Unlock()
	events = diff(p.last, cur)
	p.last, p.pods, p.cacheGen, p.lastRelist = cur, pods, gen, p.now()
	return events, true, nil
}

// byPod sorts a relist into its pods. Every relist does it for every container, so
// the pods' sandboxes and containers are laid out in one array, each pod's two lists
// slices of it, capped so that an append by a reader copies rather than overwrites.
func byPod(all []Container) map[types.UID]PodRuntime {
	type count struct{ sandboxes, containers int }
	counts := map[types.UID]count{}
	for _, c := range all {
		n := counts[c.PodUID]
		if c.Kind == KindSandbox {
			n.sandboxes++
		} else {
			n.containers++
		}
		counts[c.PodUID] = n
	}
	flat := make([]Container, len(all))
	pods := make(map[types.UID]PodRuntime, len(counts))
	next := 0
	for uid, n := range counts {
		pr := PodRuntime{UID: uid}
		s, k := next, next+n.sandboxes
		next = k + n.containers
		if n.sandboxes > 0 {
			pr.Sandboxes = flat[s:s:k]
		}
		if n.containers > 0 {
			pr.Containers = flat[k:k:next]
		}
		pods[uid] = pr
	}
	for _, c := range all {
		pr := pods[c.PodUID]
		if c.Kind == KindSandbox {
			pr.Sandboxes = append(pr.Sandboxes, c)
		} else {
			pr.Containers = append(pr.Containers, c)
		}
		pods[c.PodUID] = pr
	}
	return pods
}

// diff compares two relists.
func diff(old, cur map[string]seen) []Event {
	var events []Event
	for id, c := range cur {
		o, was := old[id]
		switch {
		case was && o.state == c.state && o.pid == c.pid:
			continue
		case c.state == StateRunning:
			events = append(events, Event{c.uid, ContainerStarted, id})
		case c.state == StateExited && (!was || o.state != StateExited):
			events = append(events, Event{c.uid, ContainerDied, id})
		default:
			events = append(events, Event{c.uid, ContainerChanged, id})
		}
	}
	for id, o := range old {
		if _, ok := cur[id]; !ok {
			events = append(events, Event{o.uid, ContainerRemoved, id})
		}
	}
	return events
}

// Pod returns the cached runtime state of a pod and the generation of the relist that
// observed it (0 before the first relist). A worker never acts on a state observed by a
// relist that started before its own last actions ended (see Started).
func (p *PLEG) Pod(uid types.UID) (PodRuntime, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.pods[uid]
	pr.UID = uid
	return pr, p.cacheGen
}

// Generation is the generation of the cache: that of the relist it comes from.
func (p *PLEG) Generation() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cacheGen
}

// Started is the generation of the newest relist started: a cache whose generation is
// greater was listed after this call.
func (p *PLEG) Started() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// Pods returns the cached runtime state of every pod the runtime holds.
func (p *PLEG) Pods() map[types.UID]PodRuntime {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[types.UID]PodRuntime, len(p.pods))
	for k, v := range p.pods {
		out[k] = v
	}
	return out
}

// Healthy reports whether a relist completed in the last 3 minutes, and when the last
// one did.
func (p *PLEG) Healthy() (bool, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.lastRelist.IsZero() && p.now().Sub(p.lastRelist) < relistUnhealthy, p.lastRelist
}
