package manifests

import corev1 "k8s.io/api/core/v1"

// QOSClass is the pod's QoS class as the apiserver computes it, from requests and
// limits of cpu and memory: those of spec.resources when the pod sets them there
// (ComputePodQOS with pod-level resources), else those of its containers.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	if HasPodResources(pod) {
		return podLevelQOS(pod.Spec.Resources)
	}
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	guaranteed, some := true, false
	for _, c := range all {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
				some = true
			}
			if !hasLim || !hasReq || req.Cmp(lim) != 0 {
				guaranteed = false
			}
		}
	}
	switch {
	case !some:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// podLevelQOS is the class of the pod-level resources alone: Guaranteed when the
// requests of cpu and memory both equal their limits, BestEffort when neither is set,
// Burstable otherwise (a request below its limit, or one resource set and not the
// other).
func podLevelQOS(r *corev1.ResourceRequirements) corev1.PodQOSClass {
	var class corev1.PodQOSClass
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		if req.Cmp(lim) != 0 {
			return corev1.PodQOSBurstable
		}
		this := corev1.PodQOSGuaranteed
		if req.IsZero() {
			this = corev1.PodQOSBestEffort
		}
		if class != "" && class != this {
			return corev1.PodQOSBurstable
		}
		class = this
	}
	return class
}
