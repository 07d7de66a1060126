package runner

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// relistRequests are the asks for a relist sooner than the relist period: the PLEG's
// goroutine takes the signal, the loop the workers to wake with the relist's result.
type relistRequests struct {
	pending chan struct{} // one slot: a relist is asked for

	mu       sync.Mutex         // guards awaiting
	awaiting map[types.UID]bool // the workers to wake with the next relist's result
}

func newRelistRequests() *relistRequests {
	return &relistRequests{pending: make(chan struct{}, 1), awaiting: map[types.UID]bool{}}
}

// request asks the PLEG for a relist as soon as possible, and for the worker of uid
// (if any) to be woken by its result.
func (q *relistRequests) request(uid types.UID) {
	if uid != "" {
		q.mu.Lock()
		q.awaiting[uid] = true
		q.mu.Unlock()
	}
	select {
	case q.pending <- struct{}{}:
	default: // one is pending already
	}
}

// awaited takes the set of workers that asked for a relist since it was last taken.
func (q *relistRequests) awaited() map[types.UID]bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.awaiting
	q.awaiting = map[types.UID]bool{}
	return out
}
