package service

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestSummary(t *testing.T) {
	pod := func(phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
	}
	for _, tc := range []struct {
		pods []*corev1.Pod
		want string
	}{
		{nil, "0 pods"},
		{[]*corev1.Pod{pod(corev1.PodRunning)}, "1 pod: 1 running"},
		{[]*corev1.Pod{pod(corev1.PodRunning), pod(corev1.PodFailed), pod(corev1.PodRunning), pod(corev1.PodPending)}, "4 pods: 2 running, 1 pending, 1 failed"},
	} {
		if got := summary(tc.pods); got != tc.want {
			t.Errorf("summary = %q, want %q", got, tc.want)
		}
	}
}
