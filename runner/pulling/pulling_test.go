package pulling

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/wire"
)

func TestShowMakesTheContainersThatWaitForTheImageWaitWithItsProgress(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	exited := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}
	creating := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	pulling := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating, Message: `Pulling image "app:2": 1.0 MB of 2.0 MB`}}
	pod := &corev1.Pod{Status: corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", Image: "app:2", State: creating}},
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", Image: "app:2", State: exited},   // the one pulled for: restarted
			{Name: "same", Image: "app:2", State: exited},  // finished: waits for nothing
			{Name: "side", Image: "app:2", State: running}, // runs: waits for nothing
			{Name: "other", Image: "db:1", State: creating},
		},
	}}
	got := Show(pod, "app", "app:2", wire.PullProgress{Done: 1_000_000, Total: 2_000_000})
	want := []corev1.ContainerState{pulling, pulling, exited, running, creating}
	var states []corev1.ContainerState
	for _, st := range append(got.Status.InitContainerStatuses, got.Status.ContainerStatuses...) {
		states = append(states, st.State)
	}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if pod.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Error("Show changed the pod it was given")
	}
}
