package containerdrt

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// WatchExits calls notify whenever a task of staticpod's namespace exits, until ctx is
// done; then it returns nil. It also tells List of every change of a container record
// in the namespace (RecordsChanged), made by anyone. It only cuts latency: the PLEG's
// polling stays the path that is always right, so a lost event or a broken
// subscription (containerd restarting) costs at most one relist period, or
// recordsRefresh for a record changed by another client. A broken subscription is
// retried by the caller's next call.
func (r *Runtime) WatchExits(ctx context.Context, notify func()) error {
	ctx = namespaces.WithNamespace(ctx, r.cfg.Namespace)
	events, errs := r.client.Subscribe(ctx,
		fmt.Sprintf(`topic=="/tasks/exit",namespace==%q`, r.cfg.Namespace),
		fmt.Sprintf(`topic~="^/containers/",namespace==%q`, r.cfg.Namespace))
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			if ev.Topic != "/tasks/exit" {
				r.RecordsChanged()
				continue
			}
			notify()
		case err := <-errs:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch task exits: %w", convertErr(err))
		}
	}
}
