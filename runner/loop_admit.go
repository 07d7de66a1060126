package runner

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/events"
)

// admit decides which desired pods are refused (Admit): those their source may not
// run, and those whose host ports are taken; the pods that run have theirs first, and
// the pods being stopped keep theirs until they are gone.
func (l *loop) admit(desired map[types.UID]*corev1.Pod) map[types.UID]Rejection {
	var leaving []*corev1.Pod
	for uid, w := range l.workers {
		w.mu.Lock()
		if (w.kill || desired[uid] == nil) && w.pod != nil {
			leaving = append(leaving, w.pod)
		}
		w.mu.Unlock()
	}
	running := func(uid types.UID) bool { w := l.workers[uid]; return w != nil && !w.killed() }
	rejected := Admit(desired, l.restrictions, l.host, running, leaving)
	l.admitDevices(desired, rejected, running)
	return rejected
}

// readmit decides again on the pods refused for their host ports, once a pod that
// held some is gone, and starts those that may run now.
func (l *loop) readmit(ctx context.Context) {
	if len(l.rejected) == 0 {
		return
	}
	was := l.rejected
	desired := l.revs.Substitute(l.config.desired)
	rejected := l.admit(desired)
	l.reject(desired, rejected)
	for uid := range was {
		if pod := desired[uid]; pod != nil && rejected[uid].Pod == nil {
			l.want(ctx, uid, pod)
		}
	}
}

// reject publishes the status of the refused pods, with an event, logged once per pod;
// a pod admitted again loses that status until its worker publishes one.
func (l *loop) reject(desired map[types.UID]*corev1.Pod, rejected map[types.UID]Rejection) {
	for uid, rej := range rejected {
		if !l.rejected[uid] {
			l.log.Warn("pod refused", "pod", manifests.Key(rej.Pod), "uid", uid, "reason", rej.Reason(), "message", rej.Message())
		}
		l.events.Add(events.Record{UID: uid, Pod: manifests.Key(rej.Pod), Type: events.Warning, Reason: rej.Reason(), Message: rej.Message()})
		out := rej.Pod.DeepCopy()
		out.Status = rej.Status()
		l.pub.setStatus(uid, out)
	}
	for uid := range l.rejected {
		if _, still := rejected[uid]; still {
			continue
		}
		l.pub.dropStatus(uid)
		if _, wanted := desired[uid]; !wanted && l.workers[uid] == nil {
			l.events.Forget(uid)
		}
	}
	l.rejected = map[types.UID]bool{}
	for uid := range rejected {
		l.rejected[uid] = true
	}
}
