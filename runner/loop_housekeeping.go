package runner

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
)

// housekeeping kills containers no wanted pod owns (once their source has delivered a
// snapshot, so that a restart of staticpod adopts rather than kills), and removes
// garbage: exited attempts older than the latest, and everything of removed pods.
func (l *loop) housekeeping(ctx context.Context) {
	pods := l.pleg.Pods()
	for uid, pr := range pods {
		if _, ok := l.workers[uid]; ok || !l.sourceReady(pr) || l.replaced(pr) {
			continue
		}
		if len(pr.Running()) == 0 && !sandboxRunning(pr) && len(pr.Containers)+len(pr.Sandboxes) == 0 {
			continue
		}
		l.log.Info("removing orphaned pod", "uid", uid)
		l.startWorker(ctx, uid, nil)
	}
	if l.gcBusy {
		return
	}
	n := 0
	for _, pr := range pods {
		n += len(pr.Sandboxes) + len(pr.Containers)
	}
	all := make([]Container, 0, n) // every 2 s: 100 pods' worth grew by copies to twice that
	keep := map[types.UID]bool{}
	for uid, pr := range pods {
		all = append(all, pr.Sandboxes...)
		all = append(all, pr.Containers...)
		if _, ok := l.workers[uid]; ok {
			keep[uid] = true
		}
	}
	garbage := Garbage(all, keep)
	if len(garbage) == 0 {
		return
	}
	l.gcBusy = true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for _, c := range garbage {
			if c.PodUID != "" && !keep[c.PodUID] {
				continue // a removed pod's worker removes its containers and data
			}
			if err := l.rt.RemoveContainer(ctx, c.ID); err != nil {
				l.log.Warn("remove exited container", "id", c.ID, "err", err)
			}
		}
		l.gcDone <- struct{}{}
	}()
}

// replaced reports whether pr is the running instance of a pod whose edited revision's
// images are being pulled: it stops once they are present (loop.prepulled).
func (l *loop) replaced(pr PodRuntime) bool {
	rp, ok := runningPod(pr)
	return ok && l.prepulls.Pulling(rp.Namespace+"/"+rp.Name)
}

// sourceReady reports whether the source that created a pod's containers has delivered
// a snapshot (containers with no source label count once any source has).
func (l *loop) sourceReady(pr PodRuntime) bool {
	rp, _ := runningPod(pr)
	return l.config.Ready(rp.Source)
}
