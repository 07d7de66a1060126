package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/runner"
)

// watchExits wakes the runner's PLEG when containerd reports a task exit, so a
// crashed container restarts without waiting for the next relist. Polling stays the
// correctness path: a broken subscription is retried, and never stops staticpod.
func watchExits(ctx context.Context, rt *containerdrt.Runtime, r *runner.Runner, log *slog.Logger) error {
	for ctx.Err() == nil {
		if err := rt.WatchExits(ctx, r.Wake); err != nil {
			log.Debug("task exit events interrupted; relisting still polls", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
	return nil
}
