package runner

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// handlerTarget is a container with a named port, probed through the fake runtime,
// which dials from the host.
func handlerTarget(port int) (*Runner, target) {
	f := newFakeRuntime(time.Now)
	r, _ := New(Options{Runtime: f})
	c := &corev1.Container{Name: "c", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	return r, target{pod: &corev1.Pod{}, container: c, id: "c1"}
}
