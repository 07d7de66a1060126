package manifests

import corev1 "k8s.io/api/core/v1"

// Key is the pod's full name, namespace/name: one pod of that name runs at a time, and
// logs and commands name pods by it.
func Key(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// SourceOf is the kind of source pod came from (SourceFile, SourceHTTP, SourceAPI), as
// its loader annotated it; "" for a pod no loader saw.
func SourceOf(pod *corev1.Pod) string { return pod.Annotations[AnnotationSource] }

// LocationOf is where in its source pod came from (a file's path, a URL), as its
// loader annotated it.
func LocationOf(pod *corev1.Pod) string { return pod.Annotations[AnnotationLocation] }

// IsSidecar reports whether c, an init container, is a sidecar: one that restarts
// (restartPolicy: Always) and runs beside the app containers. The field is allowed on
// init containers only.
func IsSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
