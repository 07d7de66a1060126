package cgroups

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPodLimits(t *testing.T) {
	res := func(cpu, mem string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	two := func(a, b corev1.ResourceRequirements) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: a}, {Name: "b", Resources: b}}}}
	}
	withPod := func(r corev1.ResourceRequirements, p *corev1.Pod) *corev1.Pod {
		p.Spec.Resources = &r
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want podLimits
	}{
		{"guaranteed: the sums", two(corev1.ResourceRequirements{Limits: res("100m", "32Mi"), Requests: res("100m", "32Mi")},
			corev1.ResourceRequirements{Limits: res("400m", "16Mi"), Requests: res("400m", "16Mi")}),
			podLimits{memory: 48 << 20, cpuQuota: 50000, cpuShares: 512}},
		{"one container without limits: none", two(corev1.ResourceRequirements{Limits: res("100m", "32Mi")}, corev1.ResourceRequirements{Requests: res("250m", "")}),
			podLimits{cpuShares: 256}},
		{"besteffort", two(corev1.ResourceRequirements{}, corev1.ResourceRequirements{}), podLimits{cpuShares: minShares}},
		{"pod-level resources: their limits and the shares of their requests", withPod(corev1.ResourceRequirements{Requests: res("250m", "32Mi"), Limits: res("500m", "64Mi")},
			two(corev1.ResourceRequirements{Limits: res("100m", "32Mi"), Requests: res("100m", "32Mi")}, corev1.ResourceRequirements{})),
			podLimits{memory: 64 << 20, cpuQuota: 50000, cpuShares: 256}},
		{"pod-level memory limit, containers' cpu limits", withPod(corev1.ResourceRequirements{Limits: res("", "64Mi")},
			two(corev1.ResourceRequirements{Limits: res("100m", ""), Requests: res("100m", "")}, corev1.ResourceRequirements{Limits: res("200m", ""), Requests: res("200m", "")})),
			podLimits{memory: 64 << 20, cpuQuota: 30000, cpuShares: 307}},
	} {
		if got := podLimitsOf(tc.pod); got != tc.want {
			t.Errorf("%s: podLimitsOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if cpuWeight(minShares) != 1 || cpuWeight(maxShares) != 10000 || cpuWeight(1024) != 39 {
		t.Errorf("cpuWeight: 2 -> %d, 262144 -> %d, 1024 -> %d; want 1, 10000, 39", cpuWeight(minShares), cpuWeight(maxShares), cpuWeight(1024))
	}
}
