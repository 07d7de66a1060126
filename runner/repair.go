package runner

import "context"

// relistRepaired relists, has the runtime repair what the relist saw, and relists
// again when the repair changed what the runtime reports: the events are those of both
// relists, and the cache is the repaired state.
//
// The first call repairs before the PLEG's cache is filled at all: the loop starts a
// worker for a pod once the cache has a generation, so the first repair must come
// before the first relist that fills it. That is what orders the repairs of a
// restart (stopping a sandbox whose network setup was interrupted, killing what a lost
// shim left running, sweeping interrupted creations) before any pod's first sync. The
// cache takes the list that repair worked from when it changed nothing (a restart over
// pods that ran on: one list of every record and task, not two); else the runtime is
// relisted and repaired as on any relist. On later relists, a worker that reads the
// cache between the two relists sees what needs repair as unknown, and waits.
func (r *Runner) relistRepaired(ctx context.Context) ([]Event, error) {
	if !r.repairedOnce.Load() {
		events, taken, err := r.pleg.RelistIf(ctx, func() bool { return !r.rt.Repair(ctx) })
		if err != nil {
			return nil, err
		}
		r.repairedOnce.Store(true)
		if taken {
			return events, nil
		}
	}
	events, err := r.pleg.Relist(ctx)
	if err != nil || !r.rt.Repair(ctx) {
		return events, err
	}
	more, err := r.pleg.Relist(ctx)
	if err != nil {
		return events, nil // the repaired state shows at the next relist
	}
	return append(events, more...), nil
}
