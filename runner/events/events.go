// Package events keeps the recent events of every pod and of the daemon itself, as a
// cluster's event log would, for the API, once's progress and the daemon's watchers
// (disk space) to read and add to. It imports only api/wire, whose Event a record is.
package events

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/api/wire"
)

// eventsPerPod bounds each pod's ring of events; eventsGlobal bounds the ring of events
// that concern no pod (a source failing, a manifest refused).
const (
	eventsPerPod = 50
	eventsGlobal = 200
)

// Event types, as on a cluster.
const (
	Normal  = "Normal"
	Warning = "Warning"
)

// Record is one event: what happened, to what, how often. Clients read it as
// wire.Event.
type Record = wire.Event

// Store keeps the recent events of every pod and of the runner itself, folding
// repeats (same reason and message) into one record with a count, as kubectl shows
// them. It is safe for concurrent use.
type Store struct {
	now func() time.Time

	mu     sync.Mutex // guards pods, global and subs
	pods   map[types.UID][]Record
	global []Record
	subs   map[chan Record]struct{}
}

// New returns an empty event store.
func New(now func() time.Time) *Store {
	return &Store{now: now, pods: map[types.UID][]Record{}, subs: map[chan Record]struct{}{}}
}

// Add records an event. Records with a UID go to that pod's ring, others to the global
// ring.
func (e *Store) Add(r Record) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	r.First, r.Last, r.Count = now, now, 1
	ring, limit := e.global, eventsGlobal
	if r.UID != "" {
		ring, limit = e.pods[r.UID], eventsPerPod
	}
	if n := len(ring); n > 0 && same(ring[n-1], r) {
		ring[n-1].Last = now
		ring[n-1].Count++
		r = ring[n-1]
	} else {
		ring = append(ring, r)
		if len(ring) > limit {
			ring = ring[len(ring)-limit:]
		}
	}
	if r.UID != "" {
		e.pods[r.UID] = ring
	} else {
		e.global = ring
	}
	for ch := range e.subs {
		select {
		case ch <- r:
		default: // a slow reader misses events rather than block the runner
		}
	}
}

func same(a, b Record) bool {
	return a.Reason == b.Reason && a.Message == b.Message && a.Container == b.Container && a.Type == b.Type
}

// Pod returns a pod's events, oldest first.
func (e *Store) Pod(uid types.UID) []Record {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Record(nil), e.pods[uid]...)
}

// All returns every event, the global ones first, then each pod's.
func (e *Store) All() []Record {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := append([]Record(nil), e.global...)
	for _, ring := range e.pods {
		out = append(out, ring...)
	}
	return out
}

// Forget drops the events of a pod that is gone.
func (e *Store) Forget(uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pods, uid)
}

// Subscribe returns a channel of new events and a function that ends the subscription.
func (e *Store) Subscribe() (<-chan Record, func()) {
	ch := make(chan Record, 64)
	e.mu.Lock()
	e.subs[ch] = struct{}{}
	e.mu.Unlock()
	return ch, func() {
		e.mu.Lock()
		delete(e.subs, ch)
		e.mu.Unlock()
	}
}
