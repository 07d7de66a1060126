package containerdrt

import (
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/containerdrt/spec"
)

// The pods, inputs and files the integration tests of specs and mounts run, as the
// unit tests of packages poddir and spec make them.

// specTestInput is a defaulted pod "web" with one container "app" running image, with
// the hostname the pod directory's preparation would give it. It mounts nothing: the
// tests that use it build no mounts.
func specTestInput(image ocispec.ImageConfig) spec.Input {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-node1", Namespace: "prod", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"example.com/owner": "ops"},
		},
		Spec: corev1.PodSpec{
			NodeName:           "node1",
			ServiceAccountName: "default",
			Containers:         []corev1.Container{{Name: "app", Image: "busybox"}},
		},
	}
	return spec.Input{
		Pod: pod, Container: &pod.Spec.Containers[0], Image: image,
		PodIP: "10.0.0.7", HostIP: "192.168.1.2",
		Prepared: spec.Prepared{Hostname: "web-node1"},
	}
}

func specContainerSC(in spec.Input) *corev1.SecurityContext {
	if in.Container.SecurityContext == nil {
		in.Container.SecurityContext = &corev1.SecurityContext{}
	}
	return in.Container.SecurityContext
}

func specPodSC(in spec.Input) *corev1.PodSecurityContext {
	if in.Pod.Spec.SecurityContext == nil {
		in.Pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	return in.Pod.Spec.SecurityContext
}
