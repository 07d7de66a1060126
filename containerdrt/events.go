package containerdrt

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// WatchExits calls notify whenever a task of staticpod's namespace exits, until ctx is
// done; then it returns nil. It only cuts latency: the PLEG's polling stays the path
// that is always right, so a lost event or a broken subscription (containerd
// restarting) costs at most one relist period. A broken subscription is retried by the
// caller's next call.
func (r *Runtime) WatchExits(ctx context.Context, notify func()) error {
	ctx = namespaces.WithNamespace(ctx, r.cfg.Namespace)
	filter := fmt.Sprintf(`topic=="/tasks/exit",namespace==%q`, r.cfg.Namespace)
	events, errs := r.client.Subscribe(ctx, filter)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-events:
			notify()
		case err := <-errs:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch task exits: %w", convertErr(err))
		}
	}
}
