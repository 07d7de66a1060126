package runner

import "context"

// relistRepaired relists, has the runtime repair what the relist saw, and relists
// again when the repair changed what the runtime reports: the events are those of both
// relists, and the cache is the repaired state.
//
// It assumes that no worker acts on the first relist before the repair that follows
// it is done: workers start only once the loop has the first relist's result, which
// runPLEG hands over after this returns. That is what orders the repairs of a
// restart (stopping a sandbox whose network setup was interrupted, killing what a lost
// shim left running, sweeping interrupted creations) before any pod's first sync. On
// later relists, a worker that reads the cache between the two relists sees what
// needs repair as unknown, and waits.
func (r *Runner) relistRepaired(ctx context.Context) ([]Event, error) {
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
