package runner

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Restart back-off, as on the kubelet: the first restart is immediate, the next waits
// 10 s after the exit, doubling up to 5 min; a container that ran for 10 min before it
// exited starts over.
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
	backoffReset   = 10 * time.Minute
)

// Backoffs tracks the restart back-off of every container. It is safe for concurrent
// use by the pod workers.
type Backoffs struct {
	mu     sync.Mutex                   // guards delays
	delays map[backoffKey]time.Duration // the wait before the next restart
}

type backoffKey struct {
	uid  types.UID
	name string
}

// NewBackoffs returns an empty back-off table.
func NewBackoffs() *Backoffs {
	return &Backoffs{delays: map[backoffKey]time.Duration{}}
}

// Wait is a Backoff: how long the named container, whose last attempt is last, must
// still wait at now before it is restarted.
func (b *Backoffs) Wait(uid types.UID, name string, last Container, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := backoffKey{uid, name}
	if !last.StartedAt.IsZero() && last.FinishedAt.Sub(last.StartedAt) >= backoffReset {
		delete(b.delays, key)
	}
	delay, ok := b.delays[key]
	if !ok {
		return 0
	}
	return max(0, delay-now.Sub(last.FinishedAt))
}

// Restarted records that the named container is being restarted, so that the next
// restart waits longer.
func (b *Backoffs) Restarted(uid types.UID, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := backoffKey{uid, name}
	if d, ok := b.delays[key]; ok {
		b.delays[key] = min(2*d, backoffMax)
	} else {
		b.delays[key] = backoffInitial
	}
}

// Forget drops the back-off of every container of a pod that is gone.
func (b *Backoffs) Forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.delays {
		if k.uid == uid {
			delete(b.delays, k)
		}
	}
}
