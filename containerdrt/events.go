package containerdrt

import (
	"context"
	"fmt"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/typeurl/v2"
)

// Topics of the task events WatchExits follows.
const (
	topicExit = "/tasks/exit"
	topicOOM  = "/tasks/oom"
)

// WatchExits calls notify whenever a task of staticpod's namespace exits, until ctx is
// done; then it returns nil. It only cuts latency: the PLEG's polling stays the path
// that is always right, so a lost event or a broken subscription (containerd
// restarting) costs at most one relist period. A broken subscription is retried by the
// caller's next call.
//
// It also records the OOM kills the shim reports (recordOOM): with the systemd cgroup
// driver, systemd removes a container's scope, and with it memory.events, as soon as
// its last process is gone, before a relist can read it. And it tells List of every
// change of a container record in the namespace (recordsChanged), made by anyone; one
// it misses is seen recordsRefresh later.
func (r *Runtime) WatchExits(ctx context.Context, notify func()) error {
	ctx = namespaces.WithNamespace(ctx, r.cfg.Namespace)
	filter := func(topic string) string {
		return fmt.Sprintf(`topic==%q,namespace==%q`, topic, r.cfg.Namespace)
	}
	r.records.subscribing()
	ch, errs := r.client.Subscribe(ctx, filter(topicExit), filter(topicOOM),
		fmt.Sprintf(`topic~="^/containers/",namespace==%q`, r.cfg.Namespace))
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-ch:
			switch e.Topic {
			case topicOOM:
				r.recordOOM(ctx, e)
			case topicExit:
				notify()
			default:
				r.recordsChanged(recordEventOf(e))
			}
		case err := <-errs:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch task exits: %w", convertErr(err))
		}
	}
}

// recordOOM labels the container of a TaskOOM event as OOM-killed, for readExit. The
// shim reports the kill before the task's exit, and this runs before the exit's notify,
// so the label is there when the relist reads the exit.
func (r *Runtime) recordOOM(ctx context.Context, e *events.Envelope) {
	v, err := typeurl.UnmarshalAny(e.Event)
	oom, ok := v.(*apievents.TaskOOM)
	if err != nil || !ok {
		return
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	if _, err := r.setLabels(ctx, oom.ContainerID, map[string]string{labelOOMKilled: "true"}); err != nil {
		r.log.Warn("record an OOM kill", "id", oom.ContainerID, "err", err)
	}
}

// recordEventOf is what the event of a change of a container record tells.
func recordEventOf(e *events.Envelope) recordEvent {
	v, err := typeurl.UnmarshalAny(e.Event)
	if err != nil {
		return recordEvent{}
	}
	switch ev := v.(type) {
	case *apievents.ContainerCreate:
		return recordEvent{id: ev.ID, op: "create"}
	case *apievents.ContainerUpdate:
		return recordEvent{id: ev.ID, op: "update", labels: ev.Labels}
	case *apievents.ContainerDelete:
		return recordEvent{id: ev.ID, op: "delete"}
	}
	return recordEvent{}
}
