package manifests

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The resources of a pod as a whole, as the kubelet computes them
// (k8s.io/component-helpers/resource PodRequests and PodLimits, with the
// PodLevelResources feature on, as it is by default): each is the aggregate of the
// containers' (sidecars running beside the regular containers, init containers one at
// a time), unless the pod sets it in spec.resources, which then decides.

// podLevelResources are the resources spec.resources sets that staticpod applies;
// validation refuses huge pages there.
var podLevelResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// HasPodResources reports whether the pod sets requests or limits of a resource in
// spec.resources (the kubelet's IsPodLevelResourcesSet): its containers then share
// what it sets, and a container without a limit of its own is held to the pod's.
func HasPodResources(pod *corev1.Pod) bool {
	r := pod.Spec.Resources
	if r == nil {
		return false
	}
	for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
		for name := range l {
			if isCPUOrMemory(name) || isHugePages(name) {
				return true
			}
		}
	}
	return false
}

// PodRequests are the requests of the pod as a whole: the pod-level requests where
// spec.resources sets them, else the aggregate of its containers', plus the pod's
// overhead (spec.overhead, from its RuntimeClass).
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	reqs := ContainerRequests(pod)
	if HasPodResources(pod) {
		for _, name := range podLevelResources {
			if q, ok := pod.Spec.Resources.Requests[name]; ok {
				reqs[name] = q.DeepCopy()
			}
		}
	}
	addResources(reqs, pod.Spec.Overhead)
	return reqs
}

// ContainerRequests is the aggregate of the requests of the pod's containers,
// spec.resources aside (AggregateContainerRequests).
func ContainerRequests(pod *corev1.Pod) corev1.ResourceList {
	return aggregateContainers(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests })
}

// PodLimits are the CPU and memory limits of a pod as a whole, as the kubelet sets
// them on the pod's cgroup (ResourceConfigForPod): the pod-level limit where
// spec.resources sets one, else the aggregate of the containers' limits when every
// container, init containers included, has one. A resource is absent when the pod as
// a whole is not capped. The pod's overhead (spec.overhead) is added to each limit
// there is, as the kubelet adds it.
func PodLimits(pod *corev1.Pod) corev1.ResourceList {
	agg := aggregateContainers(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Limits })
	out := corev1.ResourceList{}
	for _, name := range podLevelResources {
		if q, ok := podLevelLimit(pod, name); ok {
			out[name] = q
			continue
		}
		if everyContainerLimits(pod, name) {
			out[name] = agg[name]
		}
	}
	for name, q := range pod.Spec.Overhead {
		if cur, ok := out[name]; ok && !cur.IsZero() {
			cur.Add(q)
			out[name] = cur
		}
	}
	return out
}

// ContainerLimits are the limits a container is held to, as the kubelet sets them on
// its cgroup (kuberuntime getCPULimit, getMemoryLimit) and reports them through the
// downward API (defaultPodLimitsForDownwardAPI): its own, and for CPU and memory it
// does not limit itself, the pod-level limit. The result is a copy.
func ContainerLimits(pod *corev1.Pod, c *corev1.Container) corev1.ResourceList {
	out := c.Resources.Limits.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	if !HasPodResources(pod) {
		return out
	}
	for _, name := range podLevelResources {
		if own := out[name]; !own.IsZero() {
			continue
		}
		if q, ok := podLevelLimit(pod, name); ok {
			out[name] = q
		}
	}
	return out
}

// podLevelLimit is the pod-level limit of name, when spec.resources sets one that
// caps (a zero limit caps nothing, as the kubelet reads it).
func podLevelLimit(pod *corev1.Pod, name corev1.ResourceName) (resource.Quantity, bool) {
	if !HasPodResources(pod) {
		return resource.Quantity{}, false
	}
	q, ok := pod.Spec.Resources.Limits[name]
	if !ok || q.IsZero() {
		return resource.Quantity{}, false
	}
	return q.DeepCopy(), true
}

func everyContainerLimits(pod *corev1.Pod, name corev1.ResourceName) bool {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			if q := c.Resources.Limits[name]; q.IsZero() {
				return false
			}
		}
	}
	return true
}

// aggregateContainers is the kubelet's aggregate of one resource list of the pod's
// containers (the sidecar KEP's formula): the regular containers and the sidecars
// summed, or, where larger, what runs while an init container does: it and the
// sidecars started before it.
func aggregateContainers(pod *corev1.Pod, of func(*corev1.Container) corev1.ResourceList) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addResources(sum, of(&pod.Spec.Containers[i]))
	}
	sidecars, initPeak := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		running := corev1.ResourceList{}
		if IsSidecar(c) {
			addResources(sum, of(c))
			addResources(sidecars, of(c))
			addResources(running, sidecars)
		} else {
			addResources(running, of(c))
			addResources(running, sidecars)
		}
		maxResources(initPeak, running)
	}
	maxResources(sum, initPeak)
	return sum
}

func addResources(into, l corev1.ResourceList) {
	for name, q := range l {
		cur := into[name]
		cur.Add(q)
		into[name] = cur
	}
}

func maxResources(into, l corev1.ResourceList) {
	for name, q := range l {
		if cur, ok := into[name]; !ok || q.Cmp(cur) > 0 {
			into[name] = q.DeepCopy()
		}
	}
}
