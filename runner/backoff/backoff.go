// Package backoff keeps the restart back-off of containers, as the kubelet's: the first
// restart is immediate, the next waits 10 s after the exit, doubling up to 5 min; a
// container that ran for 10 min before it exited starts over. The runner's workers
// consult and feed it; it imports nothing of staticpod's.
package backoff

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The back-off's first wait, its longest, and the run after which it starts over.
const (
	Initial = 10 * time.Second
	Max     = 5 * time.Minute
	Reset   = 10 * time.Minute
)

// Table tracks the restart back-off of every container. It is safe for concurrent use
// by the pod workers.
type Table struct {
	mu     sync.Mutex                   // guards delays
	delays map[backoffKey]time.Duration // the wait before the next restart
}

type backoffKey struct {
	uid  types.UID
	name string
}

// New returns an empty back-off table.
func New() *Table {
	return &Table{delays: map[backoffKey]time.Duration{}}
}

// Wait returns how long the named container of pod uid, whose last attempt started at
// startedAt (zero if it never did) and finished at finishedAt, must still wait at now
// before it is restarted.
func (b *Table) Wait(uid types.UID, name string, startedAt, finishedAt, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := backoffKey{uid, name}
	if !startedAt.IsZero() && finishedAt.Sub(startedAt) >= Reset {
		delete(b.delays, key)
	}
	delay, ok := b.delays[key]
	if !ok {
		return 0
	}
	return max(0, delay-now.Sub(finishedAt))
}

// Restarted records that the named container is being restarted, so that the next
// restart waits longer.
func (b *Table) Restarted(uid types.UID, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := backoffKey{uid, name}
	if d, ok := b.delays[key]; ok {
		b.delays[key] = min(2*d, Max)
	} else {
		b.delays[key] = Initial
	}
}

// Forget drops the back-off of every container of a pod that is gone.
func (b *Table) Forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.delays {
		if k.uid == uid {
			delete(b.delays, k)
		}
	}
}
