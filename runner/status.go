package runner

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/manifests"
)

// Waiting reasons a worker records for containers it could not start.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
	ReasonCrashLoopBackOff  = "CrashLoopBackOff"
	ReasonErrImagePull      = "ErrImagePull"
	ReasonImagePullBackOff  = "ImagePullBackOff"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	ReasonCreateConfigError = "CreateContainerConfigError"
	ReasonRunContainerError = "RunContainerError"
	// ReasonCreatePodSandboxError: the pod's sandbox, or its network, could not be made;
	// the message says why, and it is tried again with a back-off.
	ReasonCreatePodSandboxError = "CreatePodSandboxError"
)

// Observed is what a pod's worker knows beyond the runtime's records: why containers
// wait, and what the probes said.
type Observed struct {
	Waiting     map[string]corev1.ContainerStateWaiting // by container name
	Unready     map[string]bool                         // containers a readiness probe failed
	Unstarted   map[string]bool                         // containers whose startup probe has not passed
	Done        bool                                    // the pod finished for good
	Reason      string                                  // why staticpod failed the pod (DeadlineExceeded); "" if it did not
	KillReasons map[string]string                       // container ID -> why staticpod killed it
	StartTime   time.Time                               // status.startTime: when the pod's first worker saw it
	RuntimeType string                                  // Runtime.Type, the scheme of container IDs
}

// Status computes a pod's v1.PodStatus from its spec, its runtime records and what its
// worker observed, as the kubelet's status manager would report it.
func Status(pod *corev1.Pod, rt PodRuntime, obs Observed, hostIP string) corev1.PodStatus {
	cur := rt.sinceSandbox()
	st := corev1.PodStatus{HostIP: hostIP, QOSClass: manifests.QOSClass(pod)}
	if hostIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: hostIP}}
	}
	if pod.Spec.HostNetwork && hostIP != "" {
		st.PodIP, st.PodIPs = hostIP, []corev1.PodIP{{IP: hostIP}}
	} else if sb := cur.Sandbox(); !pod.Spec.HostNetwork && sb != nil && sb.State == StateRunning {
		for _, ip := range sb.IPs {
			st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
		}
		if len(sb.IPs) > 0 {
			st.PodIP = sb.IPs[0]
		}
	}
	if !obs.StartTime.IsZero() {
		st.StartTime = &metav1.Time{Time: obs.StartTime}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := containerStatus(c, rt, cur, obs, ReasonContainerCreating)
		if !manifests.IsSidecar(c) {
			// As on the kubelet: a regular init container is ready once it succeeded.
			cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	initialized := initDone(pod, cur)
	appWaiting := ReasonPodInitializing
	if initialized {
		appWaiting = ReasonContainerCreating
	}
	for i := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, containerStatus(&pod.Spec.Containers[i], rt, cur, obs, appWaiting))
	}
	st.Phase = phase(pod, cur, obs, initialized)
	if obs.Reason != "" {
		// As the kubelet's eviction by a pod sync handler: Failed whatever the
		// containers' exits say.
		st.Phase, st.Reason, st.Message = corev1.PodFailed, obs.Reason, failureMessages[obs.Reason]
	}
	st.Conditions = conditions(st, initialized)
	return st
}

func containerStatus(c *corev1.Container, all, cur PodRuntime, obs Observed, defaultWaiting string) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image}
	last := cur.Latest(c.Name) // nil when it has not run in the current sandbox yet
	if newest := all.Latest(c.Name); newest != nil {
		cs.RestartCount = int32(newest.Attempt)
	}
	if prev := previousExit(all, c.Name, last); prev != nil {
		cs.LastTerminationState = corev1.ContainerState{Terminated: terminated(prev, obs)}
	}
	if w, ok := obs.Waiting[c.Name]; ok && (last == nil || last.State != StateRunning) {
		cs.State = corev1.ContainerState{Waiting: &w}
		if last != nil && last.State == StateExited {
			cs.LastTerminationState = corev1.ContainerState{Terminated: terminated(last, obs)}
		}
		return cs
	}
	if last == nil {
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: defaultWaiting}}
		return cs
	}
	cs.ContainerID = ContainerID(obs.RuntimeType, last.ID)
	cs.ImageID = last.ImageRef
	switch last.State {
	case StateRunning:
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: last.StartedAt}}}
		started := !obs.Unstarted[c.Name]
		cs.Started = &started
		cs.Ready = started && !obs.Unready[c.Name]
	case StateExited:
		cs.State = corev1.ContainerState{Terminated: terminated(last, obs)}
		started := false
		cs.Started = &started
	default:
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}}
	}
	return cs
}

// previousExit is the exited attempt of name just before last (or the newest exited
// attempt when last is nil).
func previousExit(all PodRuntime, name string, last *Container) *Container {
	var best *Container
	for i := range all.Containers {
		c := &all.Containers[i]
		if c.Name != name || c.State != StateExited || (last != nil && c.Attempt >= last.Attempt) {
			continue
		}
		if best == nil || c.Attempt > best.Attempt {
			best = c
		}
	}
	return best
}

// terminated is an exited container's state. A container staticpod killed for a
// failed probe says so in its message, unless it left a termination message.
func terminated(c *Container, obs Observed) *corev1.ContainerStateTerminated {
	msg := c.Message
	if msg == "" {
		msg = obs.KillReasons[c.ID]
	}
	return &corev1.ContainerStateTerminated{
		ExitCode:    c.ExitCode,
		Reason:      c.Reason,
		Message:     msg,
		StartedAt:   metav1.Time{Time: c.StartedAt},
		FinishedAt:  metav1.Time{Time: c.FinishedAt},
		ContainerID: ContainerID(obs.RuntimeType, c.ID),
	}
}

// initDone reports whether every init container has succeeded (or, for a sidecar,
// started) in the current sandbox.
func initDone(pod *corev1.Pod, cur PodRuntime) bool {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		last := cur.Latest(c.Name)
		sidecar := manifests.IsSidecar(c)
		switch {
		case last == nil:
			return false
		case sidecar && (last.State == StateRunning || last.State == StateExited):
		case last.State == StateExited && last.ExitCode == 0:
		default:
			return false
		}
	}
	return true
}

// phase follows the kubelet's getPhase in spirit: Pending until every app container has
// run, Running while any may still run, Succeeded or Failed once none will.
func phase(pod *corev1.Pod, cur PodRuntime, obs Observed, initialized bool) corev1.PodPhase {
	if obs.Done || finished(pod, cur) {
		for i := range pod.Spec.Containers {
			if last := cur.Latest(pod.Spec.Containers[i].Name); last == nil || last.ExitCode != 0 {
				return corev1.PodFailed
			}
		}
		if !initialized {
			return corev1.PodFailed
		}
		return corev1.PodSucceeded
	}
	if !initialized {
		return corev1.PodPending
	}
	for i := range pod.Spec.Containers {
		if cur.Latest(pod.Spec.Containers[i].Name) == nil {
			return corev1.PodPending
		}
	}
	return corev1.PodRunning
}

func conditions(st corev1.PodStatus, initialized bool) []corev1.PodCondition {
	ready := len(st.ContainerStatuses) > 0
	for _, cs := range st.ContainerStatuses {
		ready = ready && cs.Ready
	}
	var notReady []string
	for _, cs := range st.ContainerStatuses {
		if !cs.Ready {
			notReady = append(notReady, cs.Name)
		}
	}
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse}
		if ok {
			c.Status = corev1.ConditionTrue
		} else {
			c.Reason, c.Message = reason, msg
		}
		return c
	}
	notReadyMsg := fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
		notReadyMsg = ""
	}
	return []corev1.PodCondition{
		cond(corev1.PodInitialized, initialized, "ContainersNotInitialized", "containers with incomplete status"),
		cond(corev1.PodReady, ready, "ContainersNotReady", notReadyMsg),
		cond(corev1.ContainersReady, ready, "ContainersNotReady", notReadyMsg),
		cond(corev1.PodScheduled, true, "", ""),
	}
}
