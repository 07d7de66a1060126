package runner

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/events"
	"github.com/staticpod/staticpod/runner/prepull"
)

// An edited pod (a new UID under a running pod's name) has its images pulled while the
// instance it replaces runs on (runner/prepull), which stops only once they are all
// present; a failed pull keeps it. The kubelet stops first and pulls after.

// prepuller pulls an image for prepull as the pod's own start would (ensureImage): with
// the pod's pull secrets, telling of it in the pod's events.
type prepuller struct{ deps workerDeps }

func (p prepuller) Pull(ctx context.Context, pod *corev1.Pod, ref prepull.Ref) error {
	w := newWorker(p.deps, pod.UID, pod)
	if _, waiting := w.ensureImage(ctx, pod, ref.Container, ref.Image, ref.Policy); waiting != nil {
		return errors.New(waiting.Message)
	}
	return nil
}

// pullFirst reports whether w, whose pod is no longer wanted, keeps running while the
// images of the pod that replaces it under its name are pulled. The cache is not asked
// whether w runs something: it may not show yet what w just started, and the new pod
// cannot start before its pull anyway.
func (l *loop) pullFirst(ctx context.Context, w *worker, desired map[types.UID]*corev1.Pod, rejected map[types.UID]Rejection) bool {
	w.mu.Lock()
	old, kill := w.pod, w.kill
	w.mu.Unlock()
	if kill || old == nil || desired[w.uid] != nil {
		return false
	}
	for uid, pod := range desired {
		if manifests.Key(pod) == manifests.Key(old) && rejected[uid].Pod == nil {
			return l.pullBefore(ctx, pod, w.uid)
		}
	}
	return false
}

// pullBefore reports whether pod's images are still being pulled before old stops,
// and starts pulling them if need be.
func (l *loop) pullBefore(ctx context.Context, pod *corev1.Pod, old types.UID) bool {
	if !l.prepulls.Has(manifests.Key(pod), pod.UID) {
		l.pullingStatus(pod, old, prepull.Result{}) // before the pull tells its progress over it
	}
	need, started := l.prepulls.Need(ctx, manifests.Key(pod), pod)
	if started {
		l.log.Info("pulling the images of an edited pod; the running instance keeps running", "pod", manifests.Key(pod), "uid", pod.UID, "running", old)
	}
	return need
}

// runningNamesake finds a pod in the runtime with pod's namespace and name but another
// UID, with no worker, and something still running. A pod whose worker removed it
// since the last relist is not one: the cache still shows what the worker removed.
func (l *loop) runningNamesake(pod *corev1.Pod) (types.UID, bool) {
	for uid, pr := range l.pleg.Pods() {
		if uid == pod.UID || l.workers[uid] != nil || len(pr.Running()) == 0 && !sandboxRunning(pr) {
			continue
		}
		if started, ok := l.gone[uid]; ok {
			if _, gen := l.pleg.Pod(uid); gen <= started {
				continue
			}
		}
		for _, c := range append(append([]Container{}, pr.Containers...), pr.Sandboxes...) {
			if c.PodName == pod.Name && c.PodNamespace == pod.Namespace {
				return uid, true
			}
		}
	}
	return "", false
}

// runs reports whether the runtime runs a process of uid, as the last relist saw it:
// an instance with none (its containers created, never started) has no service to keep.
func (l *loop) runs(uid types.UID) bool {
	pr, _ := l.pleg.Pod(uid)
	return len(pr.Live()) > 0 || sandboxRunning(pr)
}

// prepulled acts on the end of a round of pulls for an edited pod: with every image
// present the instance it replaces stops (the pod then starts as after any edit); after
// a failure that one keeps running, and the pod's status says which image failed.
func (l *loop) prepulled(ctx context.Context, res prepull.Result) {
	name := manifests.Key(res.Pod)
	if !l.prepulls.Take(name, res) {
		return // a newer revision replaced it, or the pod is no longer wanted
	}
	old := l.names[name]
	if res.Err != nil {
		l.log.Warn("image pull failed; the running revision is kept", "pod", name, "uid", res.Pod.UID, "running", old,
			"image", res.Image, "retry", res.Retry, "err", res.Err)
		l.events.Add(events.Record{UID: res.Pod.UID, Pod: name, Type: events.Normal, Reason: "BackOff", Message: fmt.Sprintf("Back-off pulling image %q", res.Image)})
		l.pullingStatus(res.Pod, old, res)
		return
	}
	if w := l.workers[old]; w != nil && old != res.Pod.UID {
		l.log.Info("images of the edited pod present; stopping the running instance", "pod", name, "uid", res.Pod.UID, "running", old)
		w.terminate()
	} else if pod := l.pending[name]; pod != nil && pod.UID == res.Pod.UID {
		l.log.Info("images of the edited pod present", "pod", name, "uid", res.Pod.UID)
		delete(l.pending, name)
		l.want(ctx, pod.UID, pod) // staticpod restarted: the running instance has no worker yet
	}
}

// pullingStatus publishes the status of pod while its images are pulled before old
// stops: Pending, and after a failed round the image that failed.
func (l *loop) pullingStatus(pod *corev1.Pod, old types.UID, res prepull.Result) {
	obs := Observed{Waiting: map[string]corev1.ContainerStateWaiting{}, RuntimeType: l.rt.Type()}
	msg := fmt.Sprintf("pulling images; the running revision (uid %s) keeps running until they are present", old)
	if res.Err != nil {
		msg = fmt.Sprintf("pulling image %q failed, the running revision (uid %s) is kept; retrying in %v: %v", res.Image, old, res.Retry, res.Err)
		for _, c := range allContainers(pod) {
			if c.Image == res.Image {
				obs.Waiting[c.Name] = corev1.ContainerStateWaiting{Reason: ReasonImagePullBackOff, Message: fmt.Sprintf("Back-off pulling image %q: %v", c.Image, res.Err)}
			}
		}
	}
	out := pod.DeepCopy()
	out.Status = Status(pod, PodRuntime{}, obs, l.deps.hostIP)
	out.Status.Message = msg
	l.pub.setStatus(pod.UID, out)
}
