package containerdrt

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/protobuf"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/grpc"
)

// recordsRefresh is how long List may go without listing every container record
// anew: at most this late, List sees a change made by another client of containerd
// that no event reported.
const recordsRefresh = 10 * time.Second

// records keeps the container records of the namespace between relists. A relist
// lists the tasks every time, but the records (each with its OCI spec, most of what a
// list costs) only every recordsRefresh. Between, the records are kept up to date:
//   - with this Runtime's own writes, from containerd's answers to them (seen by the
//     interceptor on its connection): a burst of pods writes records all the time, and
//     listing them all after each would cost every relist a read of every record;
//   - with the records containerd reports changed (reported, from its events) in a way
//     they do not show: another client's writes. Those are read again one by one (Get).
//
// A new task always belongs to a record this Runtime created, so the tasks and the
// records agree.
type records struct {
	changes atomic.Uint64 // writes of records, through this Runtime or reported: Repair's question
	calls   sync.Map      // method -> *atomic.Uint64: the unary calls made, for Calls
	ns      string        // the namespace whose records are kept

	mu    sync.Mutex
	byID  map[string]containers.Container // read-only values; nil until the first list
	whole bool                            // list every record anew at the next List
	stale map[string]bool                 // to read again (Get) at the next List
	taken time.Time                       // when all were last listed
	// live is whether containerd's events of record changes reach reported: from the
	// first event after the exit watch subscribed. Until then another client's write
	// may go unreported (a staticpod killed a moment before this one started has its
	// last calls land now), so every write lists all anew, as any write did before.
	live bool
	// touched is the generation of each record's last change, for a read that began
	// before it not to overwrite it; gen counts changes.
	touched map[string]uint64
	gen     uint64
}

func newRecords(ns string) *records {
	return &records{ns: ns, stale: map[string]bool{}, touched: map[string]uint64{}}
}

// count is a unary interceptor that counts the calls, and keeps the records up to date
// with the writes made through it once they are done: a list that begins after one
// sees it.
func (c *records) count(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	id, write := c.written(ctx, method, req)
	err := invoker(ctx, method, req, reply, cc, opts...)
	n, ok := c.calls.Load(method)
	if !ok {
		n, _ = c.calls.LoadOrStore(method, new(atomic.Uint64))
	}
	n.(*atomic.Uint64).Add(1)
	if write {
		c.wrote(id, req, reply, err)
		c.changes.Add(1)
	}
	return err
}

// written tells whether a call writes a container record of the namespace, and which.
func (c *records) written(ctx context.Context, method string, req any) (string, bool) {
	svc, op, ok := strings.Cut(method, "/containerd.services.containers.v1.Containers/")
	if !ok || svc != "" || op == "Get" || op == "List" || op == "ListStream" {
		return "", false
	}
	if ns, ok := namespaces.Namespace(ctx); ok && c.ns != "" && ns != c.ns {
		return "", false // another namespace's: nothing of the kept records
	}
	switch r := req.(type) {
	case *containersapi.CreateContainerRequest:
		return r.GetContainer().GetID(), true
	case *containersapi.UpdateContainerRequest:
		return r.GetContainer().GetID(), true
	case *containersapi.DeleteContainerRequest:
		return r.GetID(), true
	}
	return "", true // a write of a kind not known: everything is listed anew
}

// wrote applies a write of record id to the kept records: the record containerd
// answered with, or its removal. A write that failed may or may not have been made:
// the record is read again.
func (c *records) wrote(id string, req, reply any, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" {
		c.whole = true // not known which: list all anew
		return
	}
	c.touch(id)
	if !c.live {
		c.whole = true
	}
	var rec *containersapi.Container
	switch r := reply.(type) {
	case *containersapi.CreateContainerResponse:
		rec = r.GetContainer()
	case *containersapi.UpdateContainerResponse:
		rec = r.GetContainer()
	}
	switch _, deleted := req.(*containersapi.DeleteContainerRequest); {
	case c.byID == nil: // nothing kept yet: the first list reads it (see listAll)
	case err != nil || (rec == nil && !deleted):
		c.stale[id] = true
	case deleted:
		delete(c.byID, id)
		delete(c.stale, id)
	default:
		c.byID[id] = recordOf(rec)
		delete(c.stale, id)
	}
}

// subscribing tells that the exit watch (re)subscribes to containerd's events: until
// its first event, events may be lost.
func (c *records) subscribing() {
	c.mu.Lock()
	c.live = false
	c.mu.Unlock()
}

// touch records a change of id, under mu.
func (c *records) touch(id string) {
	c.gen++
	c.touched[id] = c.gen
}

// recordEvent is what containerd's event of a change of a container record tells.
type recordEvent struct {
	id     string            // "" when the event names no record
	op     string            // "create", "update" or "delete"
	labels map[string]string // an update's: the labels it left
}

// reported is a change of a record that containerd reported (an event). The kept
// records may show it already (this Runtime's own writes do); if not, the record is
// read again before the next List. A change of another client that leaves the labels
// as they were (a new spec) is seen recordsRefresh later.
func (c *records) reported(ev recordEvent) {
	c.changes.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		// The events reach us from now on: one more list of all sees what came before.
		c.live, c.whole = true, true
	}
	if ev.id == "" {
		c.whole = true
		return
	}
	rec, kept := c.byID[ev.id]
	switch {
	case c.byID == nil:
	case ev.op == "create" && kept, ev.op == "delete" && !kept:
		return
	case ev.op == "update" && kept && maps.Equal(rec.Labels, ev.labels):
		return
	}
	c.touch(ev.id)
	c.stale[ev.id] = true
}

// kept returns the record of id as kept, when it is kept and not to be read again: as
// this Runtime's last write of it left it, or as the last list read it.
func (c *records) kept(id string) (containers.Container, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.byID[id]
	return rec, ok && !c.stale[id] && !c.whole
}

// list returns the records, sorted by ID as containerd lists them. With fresh (a
// Runtime that only observes knows of no writes) they are listed anew; else every one
// is listed anew when none are kept or recordsRefresh has passed, or else those kept
// are returned, the stale ones read again. The records are read-only.
func (c *records) list(ctx context.Context, store containers.Store, fresh bool) ([]containers.Container, error) {
	if fresh {
		return store.List(ctx) // an observer's: it keeps nothing
	}
	c.mu.Lock()
	whole := c.whole || c.byID == nil || time.Since(c.taken) >= recordsRefresh
	began := c.gen
	if whole {
		c.whole = false // a write of unknown records from now on asks for another
	}
	c.mu.Unlock()
	if whole {
		if err := c.listAll(ctx, store, began); err != nil {
			return nil, err
		}
	}
	if err := c.refresh(ctx, store); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]containers.Container, 0, len(c.byID))
	for _, rec := range c.byID {
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b containers.Container) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// listAll lists every record anew. A record changed since generation began keeps what
// the change left: the list may predate it.
func (c *records) listAll(ctx context.Context, store containers.Store, began uint64) error {
	infos, err := store.List(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	byID := make(map[string]containers.Container, len(infos))
	for _, info := range infos {
		byID[info.ID] = info
	}
	for id, gen := range c.touched {
		switch rec, kept := c.byID[id]; {
		case gen <= began:
			delete(c.touched, id)
			delete(c.stale, id) // the list read it after its change
		case c.byID == nil || c.stale[id]: // changed while listing, in a way not known
			c.stale[id] = true
		case kept: // changed while listing: as the change left it
			byID[id] = rec
		default: // removed while listing
			delete(byID, id)
		}
	}
	c.byID, c.taken = byID, time.Now()
	return nil
}

// refresh reads the stale records again, one by one.
func (c *records) refresh(ctx context.Context, store containers.Store) error {
	c.mu.Lock()
	ids := make([]string, 0, len(c.stale))
	for id := range c.stale {
		ids = append(ids, id)
	}
	began := c.gen
	c.mu.Unlock()
	for _, id := range ids {
		rec, err := store.Get(ctx, id)
		if err != nil && !errdefs.IsNotFound(err) {
			return err
		}
		c.mu.Lock()
		if c.byID != nil && c.touched[id] <= began { // else changed since: read at the next
			if err != nil {
				delete(c.byID, id)
			} else {
				c.byID[id] = rec
			}
			delete(c.stale, id)
		}
		c.mu.Unlock()
	}
	return nil
}

// recordOf is the record containerd answered a write with, as its client's store
// returns records.
func recordOf(pb *containersapi.Container) containers.Container {
	rec := containers.Container{
		ID:          pb.GetID(),
		Labels:      pb.GetLabels(),
		Image:       pb.GetImage(),
		Snapshotter: pb.GetSnapshotter(),
		SnapshotKey: pb.GetSnapshotKey(),
		CreatedAt:   protobuf.FromTimestamp(pb.GetCreatedAt()),
		UpdatedAt:   protobuf.FromTimestamp(pb.GetUpdatedAt()),
		SandboxID:   pb.GetSandbox(),
	}
	if rt := pb.GetRuntime(); rt != nil {
		rec.Runtime = containers.RuntimeInfo{Name: rt.GetName()}
		if rt.GetOptions() != nil {
			rec.Runtime.Options = rt.GetOptions()
		}
	}
	if pb.GetSpec() != nil {
		rec.Spec = pb.GetSpec()
	}
	if ext := pb.GetExtensions(); len(ext) > 0 {
		rec.Extensions = make(map[string]typeurl.Any, len(ext))
		for k, v := range ext {
			rec.Extensions[k] = v
		}
	}
	return rec
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

// recordsChanged tells the Runtime of containerd's event of a change of a container
// record: the next List reads it again unless the records kept show it already.
func (r *Runtime) recordsChanged(ev recordEvent) { r.records.reported(ev) }
