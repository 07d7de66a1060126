package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/staticpod/staticpod/containerdrt"
)

// watchExits calls wake when containerd reports a task exit (the runner's Wake, so a
// crashed container restarts without waiting for the next relist). Polling stays the
// correctness path: a broken subscription is retried, and never stops staticpod.
func watchExits(ctx context.Context, rt *containerdrt.Runtime, wake func(), log *slog.Logger) error {
	for ctx.Err() == nil {
		if err := rt.WatchExits(ctx, wake); err != nil {
			log.Debug("task exit events interrupted; relisting still polls", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
	return nil
}
