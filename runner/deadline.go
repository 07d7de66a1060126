package runner

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// A pod's spec.activeDeadlineSeconds, as the kubelet enforces it: once the pod has been
// active that long, counted from its status.startTime, its containers are stopped (with
// their grace period and preStop hooks, as any kill) and the pod is Failed with this
// reason and message, for good: no restart policy brings it back.
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// failureMessages are the status messages of the reasons for which staticpod fails a
// pod itself.
var failureMessages = map[string]string{ReasonDeadlineExceeded: MessageDeadlineExceeded}

// activeDeadline is when pod's active deadline passes for a pod that started at start;
// ok is false when the pod has none, or its start is not known.
func activeDeadline(pod *corev1.Pod, start time.Time) (at time.Time, ok bool) {
	d := pod.Spec.ActiveDeadlineSeconds
	if d == nil || start.IsZero() {
		return time.Time{}, false
	}
	return start.Add(time.Duration(*d) * time.Second), true
}

// deadlineExceeded reports whether pod has been active longer than its deadline allows
// (the kubelet's pastActiveDeadline). A pod that had finished on its own before its
// deadline came keeps its own outcome: what decides is whether its containers ended
// before the deadline (its sidecars aside: they are stopped once the others ended, and
// may end after the deadline that the pod itself beat), which the runtime's records still tell after a restart of
// staticpod, when a pod the deadline killed has finished too.
func deadlineExceeded(pod *corev1.Pod, rt PodRuntime, now time.Time) bool {
	at, ok := activeDeadline(pod, rt.Start)
	if !ok || now.Before(at) {
		return false
	}
	cur := rt.sinceSandbox()
	if !finished(pod, cur) && !initFailed(pod, cur) {
		return true
	}
	for _, c := range cur.Containers {
		if isSidecar(pod, c.Name) {
			continue // stopped because the pod finished: when does not tell how it ended
		}
		if c.State != StateExited || !c.FinishedAt.Before(at) {
			return true
		}
	}
	return false
}

// isSidecar reports whether name is one of pod's sidecars (an init container that
// restarts always).
func isSidecar(pod *corev1.Pod, name string) bool {
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.Name == name {
			return manifests.IsSidecar(c)
		}
	}
	return false
}

// initFailed reports whether a regular init container of a Never pod failed, which ends
// the pod.
func initFailed(pod *corev1.Pod, cur PodRuntime) bool {
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return false
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		last := cur.Latest(c.Name)
		if last != nil && !manifests.IsSidecar(c) && last.State == StateExited && last.ExitCode != 0 && !neverStarted(last) {
			return true
		}
	}
	return false
}

// podStart is a pod's status.startTime as far as the runtime remembers it: the start
// time recorded with its sandboxes and containers, else the earliest creation among
// them (made by a staticpod that recorded none), else seen, when the runtime holds
// nothing of the pod. Everything one instance of a pod makes records the same start;
// should they differ, the latest is that of the newest instance, the pod that runs: an
// older one was removed, and what of it housekeeping could not remove yet tells
// nothing of this one (see loop.removed).
func podStart(rt PodRuntime, seen time.Time) time.Time {
	var recorded, created time.Time
	for _, c := range append(append([]Container{}, rt.Sandboxes...), rt.Containers...) {
		if start := c.PodStart.Time(); start.After(recorded) {
			recorded = start
		}
		if !c.CreatedAt.IsZero() && (created.IsZero() || c.CreatedAt.Before(created)) {
			created = c.CreatedAt
		}
	}
	switch {
	case !recorded.IsZero():
		return recorded
	case !created.IsZero() && created.Before(seen):
		return created
	}
	return seen
}
