package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// killUnhealthy stops the running containers whose liveness or startup probe reached
// its failure threshold; the next plan restarts them per the restart policy. It
// reports whether it stopped any.
func (w *worker) killUnhealthy(ctx context.Context, pod *corev1.Pod, rt PodRuntime) bool {
	cur := rt.sinceSandbox()
	killed := false
	for _, c := range allContainers(pod) {
		last := cur.Latest(c.Name)
		if last == nil || last.State != StateRunning {
			continue
		}
		for _, kind := range []ProbeType{Liveness, Startup} {
			res, ok := w.prober.result(pod.UID, c.Name, kind, last.ID)
			if !ok || !res.failed {
				continue
			}
			probe := c.LivenessProbe
			if kind == Startup {
				probe = c.StartupProbe
			}
			msg := fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, strings.ToLower(string(kind)))
			w.killReasons[last.ID] = fmt.Sprintf("%s probe failed: %s", kind, res.message)
			w.stop(ctx, *last, probeGrace(probe, pod), "Killing", msg)
			killed = true
			break
		}
	}
	return killed
}

// unstarted lists the running containers whose startup probe has not succeeded.
func (w *worker) unstarted(pod *corev1.Pod, rt PodRuntime) map[string]bool {
	out := map[string]bool{}
	cur := rt.sinceSandbox()
	for _, c := range allContainers(pod) {
		if last := cur.Latest(c.Name); last != nil && last.State == StateRunning && !w.prober.started(pod.UID, c, last.ID) {
			out[c.Name] = true
		}
	}
	return out
}

// unready lists the running containers whose readiness probe does not pass.
func (w *worker) unready(pod *corev1.Pod, rt PodRuntime) map[string]bool {
	out := map[string]bool{}
	cur := rt.sinceSandbox()
	for _, c := range allContainers(pod) {
		last := cur.Latest(c.Name)
		if last == nil || last.State != StateRunning || c.ReadinessProbe == nil {
			continue
		}
		if res, ok := w.prober.result(pod.UID, c.Name, Readiness, last.ID); !ok || !res.ok {
			out[c.Name] = true
		}
	}
	return out
}

// probeGrace is the grace period of a container killed by a failed probe: the probe's
// own terminationGracePeriodSeconds, else the pod's.
func probeGrace(p *corev1.Probe, pod *corev1.Pod) time.Duration {
	if p != nil && p.TerminationGracePeriodSeconds != nil {
		return time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
	}
	return podGrace(pod)
}

func allContainers(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

func runningSandbox(rt PodRuntime) *Container {
	if sb := rt.Sandbox(); sb != nil && sb.State == StateRunning {
		return sb
	}
	return nil
}
