package containerdrt

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"google.golang.org/grpc"
)

// recordsRefresh is how long List may reuse the container records of an earlier list
// when nothing is known to have changed them: at most this late, List sees a change
// made by another client of containerd while no event reported it.
const recordsRefresh = 10 * time.Second

// records keeps the container records of the last list. A relist lists the tasks
// every time, but the records (each with its OCI spec, most of what a list costs) only
// when they may have changed since: this Runtime wrote one (counted by the
// interceptor on its connection), containerd reported a change (RecordsChanged, from
// its events), or recordsRefresh has passed. A new task always belongs to a record
// this Runtime created, so the tasks and the records it reuses agree.
type records struct {
	changes atomic.Uint64 // writes of records, through this Runtime or reported
	calls   sync.Map      // method -> *atomic.Uint64: the unary calls made, for Calls

	mu    sync.Mutex             // guards infos, seen and taken
	infos []containers.Container // read-only once stored
	seen  uint64                 // changes before infos were listed
	taken time.Time
}

// count is a unary interceptor that counts the writes of container records, once they
// are done: a list that begins after the count was read sees them.
func (c *records) count(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	n, ok := c.calls.Load(method)
	if !ok {
		n, _ = c.calls.LoadOrStore(method, new(atomic.Uint64))
	}
	n.(*atomic.Uint64).Add(1)
	if svc, op, ok := strings.Cut(method, "/containerd.services.containers.v1.Containers/"); ok && svc == "" && op != "Get" && op != "List" {
		c.changes.Add(1)
	}
	return err
}

// list returns the records, listed anew unless those of the last list still hold; with
// fresh, always anew (a Runtime that only observes knows of no writes).
func (c *records) list(ctx context.Context, store containers.Store, fresh bool) ([]containers.Container, error) {
	seen := c.changes.Load()
	c.mu.Lock()
	if !fresh && c.infos != nil && c.seen == seen && time.Since(c.taken) < recordsRefresh {
		defer c.mu.Unlock()
		return c.infos, nil
	}
	c.mu.Unlock()
	infos, err := store.List(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.infos, c.seen, c.taken = infos, seen, time.Now()
	return infos, nil
}

// Calls is how many unary calls of each method this Runtime has made to containerd
// ("/containerd.services.containers.v1.Containers/Create": 3): what a pod costs
// containerd, for tests and benchmarks.
func (r *Runtime) Calls() map[string]uint64 {
	out := map[string]uint64{}
	r.records.calls.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Uint64).Load()
		return true
	})
	return out
}

// RecordsChanged tells the Runtime that containerd reported a change of a container
// record (an event): the next List lists them anew.
func (r *Runtime) RecordsChanged() { r.records.changes.Add(1) }
