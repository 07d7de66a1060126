package manifests

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestQOSClass(t *testing.T) {
	res := func(req, lim string) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
		if req != "" {
			r.Requests[corev1.ResourceCPU], r.Requests[corev1.ResourceMemory] = resource.MustParse(req), resource.MustParse(req+"Mi")
		}
		if lim != "" {
			r.Limits[corev1.ResourceCPU], r.Limits[corev1.ResourceMemory] = resource.MustParse(lim), resource.MustParse(lim+"Mi")
		}
		return r
	}
	for _, tc := range []struct {
		name       string
		init, apps []corev1.ResourceRequirements
		want       corev1.PodQOSClass
	}{
		{"nothing asked", nil, []corev1.ResourceRequirements{{}}, corev1.PodQOSBestEffort},
		{"requests equal limits", nil, []corev1.ResourceRequirements{res("1", "1")}, corev1.PodQOSGuaranteed},
		{"requests below limits", nil, []corev1.ResourceRequirements{res("1", "2")}, corev1.PodQOSBurstable},
		{"one container without", nil, []corev1.ResourceRequirements{res("1", "1"), {}}, corev1.PodQOSBurstable},
		{"an init container counts", []corev1.ResourceRequirements{res("1", "")}, []corev1.ResourceRequirements{res("1", "1")}, corev1.PodQOSBurstable},
	} {
		pod := &corev1.Pod{}
		for _, r := range tc.init {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Resources: r})
		}
		for _, r := range tc.apps {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Resources: r})
		}
		if got := QOSClass(pod); got != tc.want {
			t.Errorf("%s: QOSClass = %s, want %s", tc.name, got, tc.want)
		}
	}
}
