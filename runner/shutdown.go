package runner

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// systemNodeCritical is the priority class of the pods a node needs most (kubeadm's
// control plane): at a shutdown they stop last, as on the kubelet.
const systemNodeCritical = "system-node-critical"

// IsNodeCritical reports whether pod stops in the last group at a shutdown.
func IsNodeCritical(pod *corev1.Pod) bool {
	return pod != nil && pod.Spec.PriorityClassName == systemNodeCritical
}

// ShutdownGrace is how long a shutdown of the machine gives the pods, as the kubelet's
// shutdownGracePeriod and shutdownGracePeriodCriticalPods: Total in all, of which the
// last Critical is for the node-critical pods.
type ShutdownGrace struct {
	Total, Critical time.Duration
}

// Regular is the grace period left for the pods that are not node-critical.
func (g ShutdownGrace) Regular() time.Duration { return g.Total - g.Critical }

// StopForShutdown stops every pod because the machine shuts down, as the kubelet's
// graceful node shutdown does: the regular pods first, with their preStop hooks and
// their grace periods cut to grace.Regular(), then the node-critical ones, cut to
// grace.Critical. A container that ignores its stop signal is killed when its cut
// grace period ends, so the shutdown waits grace.Total at most (and the calls that
// stop). It is for after Run has returned: nothing restarts what it stops. The exits
// are not reaped: the machine is going down, and the time is the shutdown's.
func (r *Runner) StopForShutdown(ctx context.Context, grace ShutdownGrace) error {
	if _, err := r.pleg.Relist(ctx); err != nil {
		return err
	}
	start := r.now()
	r.stopPods(ctx, func(p *corev1.Pod) bool { return !IsNodeCritical(p) }, max(grace.Regular(), time.Second))
	r.log.Info("stopped the regular pods for the shutdown", "took", r.now().Sub(start).Round(time.Millisecond))
	start = r.now()
	r.stopPods(ctx, IsNodeCritical, max(grace.Critical, time.Second))
	r.log.Info("stopped the node-critical pods for the shutdown", "took", r.now().Sub(start).Round(time.Millisecond))
	return nil
}
