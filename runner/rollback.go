package runner

import (
	"context"

	"github.com/staticpod/staticpod/runner/revisions"
)

// progress shows the revisions store the status each worker last published: a Ready
// revision is kept, one not Ready within its progress deadline is rolled back. After a
// rollback the sources' merge is enacted again, and Substitute puts the kept revision
// in the place of the one rolled back from.
func (l *loop) progress(ctx context.Context) {
	rolled := false
	for _, pod := range l.pub.pods() {
		if w := l.workers[pod.UID]; w == nil || w.killed() {
			continue
		}
		if rb := l.revs.Observe(pod); rb != nil { // logged by Observe
			rolled = true
			l.events.Add(Record{UID: rb.To, Pod: rb.Pod, Type: EventWarning, Reason: revisions.ReasonRolledBack, Message: rb.Message()})
		}
	}
	if rolled {
		desired, conflicts := l.config.Merge()
		l.enact(ctx, desired, conflicts)
	}
}
