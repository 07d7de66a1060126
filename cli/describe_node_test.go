package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDescribeNodeShowsLabelsTaintsAndWhatPodsRequest(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "cam-1", Labels: map[string]string{"device": "camera", "kubernetes.io/os": "linux"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "gate", Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(now),
				Reason: "KubeletReady", Message: "staticpod is posting ready status"}},
			NodeInfo: corev1.NodeSystemInfo{KernelVersion: "6.18.0", OperatingSystem: "linux", Architecture: "arm64"},
		},
	}
	pod := func(name string, phase corev1.PodPhase, cpu, mem string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
			Status: corev1.PodStatus{Phase: phase, StartTime: &metav1.Time{Time: now.Add(-5 * time.Minute)}}}
	}
	var out bytes.Buffer
	pods := []corev1.Pod{pod("web-cam-1", corev1.PodRunning, "250m", "256Mi"), pod("hog-cam-1", corev1.PodFailed, "4", "8Gi")}
	if err := describeNode(&out, n, pods, now); err != nil {
		t.Fatal(err)
	}
	// Compared with the tab writer's padding collapsed to one space.
	got := strings.Join(strings.Fields(strings.ReplaceAll(out.String(), "\n", " | ")), " ")
	for _, want := range []string{
		"Name: cam-1 | Labels: device=camera | kubernetes.io/os=linux | Taints: dedicated=gate:NoExecute |",
		"| Ready True Thu, 01 Jan 2026 12:00:00 +0000 KubeletReady staticpod is posting ready status |",
		"| Allocatable: | cpu: 1 | memory: 1Gi |",
		"| Architecture: arm64 |",
		"| Non-terminated Pods: (1 in total) |",
		"| default web-cam-1 250m 256Mi 5m |",
		"| cpu 250m (25%) | memory 256Mi (25%) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("describe node lacks %q:\n%s", want, out.String())
		}
	}
}
