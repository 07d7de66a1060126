package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/typeurl/v2"
)

// Event is one of containerd's task or container events, with containerd's own time
// of it: the benchmarks' clock.
type Event struct {
	Time      time.Time
	Namespace string
	Topic     string // /tasks/start, /tasks/exit, /containers/delete...
	Container string // the container's ID
	PID       uint32 // of the task's process, for starts and exits
}

// Events records every task and container event of a containerd from the moment it is
// made, so that a benchmark can ask, after it acted, when containerd saw what it
// caused, and nothing polls while the clock runs.
type Events struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every new event
	all     []Event
	err     error
	cancel  context.CancelFunc
}

// Watch subscribes to c's task and container events.
func Watch(ctx context.Context, c *client.Client) *Events {
	ctx, cancel := context.WithCancel(ctx)
	e := &Events{changed: make(chan struct{}), cancel: cancel}
	envelopes, errs := c.Subscribe(ctx)
	go func() {
		for {
			select {
			case env := <-envelopes:
				ev := Event{Time: env.Timestamp, Namespace: env.Namespace, Topic: env.Topic}
				if msg, err := typeurl.UnmarshalAny(env.Event); err == nil {
					switch m := msg.(type) {
					case *apievents.TaskStart:
						ev.Container, ev.PID = m.ContainerID, m.Pid
					case *apievents.TaskExit:
						ev.Container, ev.PID = m.ContainerID, m.Pid
						if m.ExitedAt != nil {
							ev.Time = m.ExitedAt.AsTime()
						}
					case *apievents.TaskDelete:
						ev.Container, ev.PID = m.ContainerID, m.Pid
					case *apievents.ContainerCreate:
						ev.Container = m.ID
					case *apievents.ContainerDelete:
						ev.Container = m.ID
					}
				}
				e.add(ev, nil)
			case err := <-errs:
				if ctx.Err() == nil {
					e.add(Event{}, fmt.Errorf("containerd events: %w", err))
				}
				return
			}
		}
	}()
	return e
}

// Close ends the subscription.
func (e *Events) Close() { e.cancel() }

func (e *Events) add(ev Event, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.err = err
	} else {
		e.all = append(e.all, ev)
	}
	close(e.changed)
	e.changed = make(chan struct{})
}

// Mark is a position in the record: Await looks at the events after it.
func (e *Events) Mark() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.all)
}

// Since returns the events recorded after mark.
func (e *Events) Since(mark int) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.all[mark:]...)
}

// Await waits until count events after mark match, and returns them.
func (e *Events) Await(mark, count int, timeout time.Duration, match func(Event) bool) ([]Event, error) {
	deadline := time.After(timeout)
	for {
		e.mu.Lock()
		var found []Event
		for _, ev := range e.all[mark:] {
			if match(ev) {
				found = append(found, ev)
			}
		}
		changed, err := e.changed, e.err
		e.mu.Unlock()
		if len(found) >= count {
			return found[:count], nil
		}
		if err != nil {
			return nil, err
		}
		select {
		case <-changed:
		case <-deadline:
			return nil, fmt.Errorf("%d of %d events after %s", len(found), count, timeout)
		}
	}
}

// In matches the events of topic in namespace ns.
func In(ns, topic string) func(Event) bool {
	return func(ev Event) bool { return ev.Namespace == ns && ev.Topic == topic }
}

// Last is the latest time of events.
func Last(events []Event) time.Time {
	var t time.Time
	for _, ev := range events {
		if ev.Time.After(t) {
			t = ev.Time
		}
	}
	return t
}
