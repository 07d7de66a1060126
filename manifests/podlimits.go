package manifests

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodLimits are the CPU and memory limits of a pod as a whole, as the kubelet sets
// them on the pod's cgroup: for each, the sum over the pod's containers, or the
// largest init container's where that is larger. A resource is absent when a
// container has no limit of it: the pod as a whole is then not capped.
func PodLimits(pod *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		var sum, maxInit resource.Quantity
		capped := true
		for _, c := range pod.Spec.Containers {
			q, ok := c.Resources.Limits[name]
			if !ok || q.IsZero() {
				capped = false
				break
			}
			sum.Add(q)
		}
		for _, c := range pod.Spec.InitContainers {
			q, ok := c.Resources.Limits[name]
			if !ok || q.IsZero() {
				capped = false
				break
			}
			if q.Cmp(maxInit) > 0 {
				maxInit = q
			}
		}
		if !capped {
			continue
		}
		if maxInit.Cmp(sum) > 0 {
			sum = maxInit
		}
		out[name] = sum
	}
	return out
}
