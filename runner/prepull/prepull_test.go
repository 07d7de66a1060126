package prepull

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestRefsAreEveryImageAStartPulls(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "init:1", ImagePullPolicy: corev1.PullAlways}},
		Containers: []corev1.Container{
			{Name: "app", Image: "app:1", ImagePullPolicy: corev1.PullIfNotPresent},
			{Name: "again", Image: "app:1", ImagePullPolicy: corev1.PullIfNotPresent},
		},
		Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "data:1", PullPolicy: corev1.PullNever}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}}
	want := []Ref{
		{Image: "init:1", Policy: corev1.PullAlways, Container: "init"},
		{Image: "app:1", Policy: corev1.PullIfNotPresent, Container: "app"},
		{Image: "data:1", Policy: corev1.PullNever},
	}
	if diff := cmp.Diff(want, Refs(pod)); diff != "" {
		t.Errorf("Refs() (-want +got):\n%s", diff)
	}
}
