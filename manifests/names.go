package manifests

import corev1 "k8s.io/api/core/v1"

// Key is the pod's full name, namespace/name: one pod of that name runs at a time, and
// logs and commands name pods by it.
func Key(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// IsSidecar reports whether c, an init container, is a sidecar: one that restarts
// (restartPolicy: Always) and runs beside the app containers. The field is allowed on
// init containers only.
func IsSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
