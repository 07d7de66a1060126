package runner

import "github.com/staticpod/staticpod/runner/revisions"
import "github.com/staticpod/staticpod/runner/events"

// progress shows the revisions store the status each worker last published: a Ready
// revision is kept, one not Ready within its progress deadline is rolled back. The
// loop calls it after each relist, and before each update of a source, which may
// replace a revision whose Ready status no relist followed yet. It reports whether it
// rolled a pod back: then the caller enacts the merge again, where Substitute puts the
// kept revision in the place of the one rolled back from.
func (l *loop) progress() (rolled bool) {
	for _, pod := range l.pub.pods() {
		if w := l.workers[pod.UID]; w == nil || w.killed() {
			continue
		}
		if rb := l.revs.Observe(pod); rb != nil { // logged by Observe
			rolled = true
			l.events.Add(events.Record{UID: rb.To, Pod: rb.Pod, Type: events.Warning, Reason: revisions.ReasonRolledBack, Message: rb.Message()})
		}
	}
	return rolled
}
