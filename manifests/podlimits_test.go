package manifests

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPodLimits(t *testing.T) {
	limits := func(cpu, mem string) corev1.ResourceRequirements {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return corev1.ResourceRequirements{Limits: l}
	}
	pod := func(init []corev1.ResourceRequirements, apps ...corev1.ResourceRequirements) *corev1.Pod {
		p := &corev1.Pod{}
		for _, r := range init {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Resources: r})
		}
		for _, r := range apps {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Resources: r})
		}
		return p
	}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		cpu, mem string // "" when not capped
	}{
		{"summed", pod(nil, limits("100m", "32Mi"), limits("200m", "16Mi")), "300m", "48Mi"},
		{"an init container larger", pod([]corev1.ResourceRequirements{limits("1", "64Mi")}, limits("100m", "32Mi")), "1", "64Mi"},
		{"one container without a memory limit", pod(nil, limits("100m", "32Mi"), limits("100m", "")), "200m", ""},
		{"no limits", pod(nil, corev1.ResourceRequirements{}), "", ""},
	} {
		got := PodLimits(tc.pod)
		for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: tc.cpu, corev1.ResourceMemory: tc.mem} {
			q, ok := got[name]
			switch {
			case want == "" && ok:
				t.Errorf("%s: %s capped at %s, want no cap", tc.name, name, q.String())
			case want != "" && (!ok || q.Cmp(resource.MustParse(want)) != 0):
				t.Errorf("%s: %s = %s (set %v), want %s", tc.name, name, q.String(), ok, want)
			}
		}
	}
}
