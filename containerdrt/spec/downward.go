package spec

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/staticpod/staticpod/manifests"
)

// FieldRefValue is the downward API value of a pod field, as the kubelet's
// podFieldSelectorRuntimeValue and fieldpath.ExtractFieldPathAsString compute it. A
// node has one IP per pod and host here, so the plural fields hold one address.
func FieldRefValue(in Input, ref *corev1.ObjectFieldSelector) (string, error) {
	pod := in.Pod
	switch ref.FieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return in.HostIP, nil
	case "status.podIP", "status.podIPs":
		return in.PodIP, nil
	}
	path, key, ok := splitSubscript(ref.FieldPath)
	if !ok {
		return "", fmt.Errorf("fieldRef %q is not supported", ref.FieldPath)
	}
	switch path {
	case "metadata.labels":
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return "", fmt.Errorf("fieldRef %q: invalid key: %s", ref.FieldPath, strings.Join(errs, "; "))
		}
		return pod.Labels[key], nil
	case "metadata.annotations":
		if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) > 0 {
			return "", fmt.Errorf("fieldRef %q: invalid key: %s", ref.FieldPath, strings.Join(errs, "; "))
		}
		return pod.Annotations[key], nil
	}
	return "", fmt.Errorf("fieldRef %q does not support a subscript", ref.FieldPath)
}

// splitSubscript splits "metadata.labels['key']" into its path and key, as
// fieldpath.SplitMaybeSubscriptedPath does.
func splitSubscript(fieldPath string) (path, key string, ok bool) {
	s, found := strings.CutSuffix(fieldPath, "']")
	if !found {
		return "", "", false
	}
	path, key, found = strings.Cut(s, "['")
	if !found || path == "" {
		return "", "", false
	}
	return path, key, true
}

// ResourceFieldRefValue is the downward API value of a resourceFieldRef, as the
// kubelet's ExtractContainerResourceValue computes it: CPU in whole divisor units
// rounded up (divisor 1 by default), memory, ephemeral storage and huge pages likewise
// in bytes. A limit the container does not set is the pod-level limit where the pod
// sets one, else the node's allocatable amount (defaultPodLimitsForDownwardAPI), here
// the whole host.
func ResourceFieldRefValue(in Input, ref *corev1.ResourceFieldSelector) (string, error) {
	c, err := refContainer(in, ref.ContainerName)
	if err != nil {
		return "", err
	}
	divisor := resource.MustParse("1")
	if !ref.Divisor.IsZero() {
		divisor = ref.Divisor
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resourceFieldRef %q is not supported", ref.Resource)
	}
	var list corev1.ResourceList
	if kind == "requests" {
		list = c.Resources.Requests
	} else {
		list = withAllocatable(manifests.ContainerLimits(in.Pod, c), in.PodDir)
	}
	rn := corev1.ResourceName(name)
	if rn != corev1.ResourceCPU && rn != corev1.ResourceMemory && rn != corev1.ResourceEphemeralStorage && !strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
		return "", fmt.Errorf("resourceFieldRef %q is not supported", ref.Resource)
	}
	q := list[rn]
	if rn == corev1.ResourceCPU {
		return strconv.FormatInt(ceilDiv(q.MilliValue(), divisor.MilliValue()), 10), nil
	}
	return strconv.FormatInt(ceilDiv(q.Value(), divisor.Value()), 10), nil
}

// refContainer is the container a resourceFieldRef names: this one when the name is
// empty, else any container of the pod.
func refContainer(in Input, name string) (*corev1.Container, error) {
	if name == "" || name == in.Container.Name {
		return in.Container, nil
	}
	for _, list := range [][]corev1.Container{in.Pod.Spec.Containers, in.Pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i], nil
			}
		}
	}
	return nil, fmt.Errorf("resourceFieldRef: no container %q in the pod", name)
}

func ceilDiv(n, d int64) int64 {
	if d <= 0 {
		return 0
	}
	q := n / d
	if n%d > 0 {
		q++
	}
	return q
}

// withAllocatable returns limits with CPU, memory and ephemeral storage that are unset
// or zero filled from the node's allocatable resources, as the kubelet's
// MergeContainerResourceLimits does. limits is not modified.
func withAllocatable(limits corev1.ResourceList, podDir string) corev1.ResourceList {
	out := limits.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range hostAllocatable(podDir) {
		if cur, ok := out[name]; !ok || cur.IsZero() {
			out[name] = q
		}
	}
	return out
}

// hostAllocatable is what a kubelet without reservations reports as allocatable: the
// CPUs this process may run on, MemTotal, and the size of the filesystem holding the
// pod's directory. A value that cannot be read is left out.
func hostAllocatable(podDir string) corev1.ResourceList {
	list := corev1.ResourceList{
		corev1.ResourceCPU: *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
	}
	if mem, err := MemTotal(); err == nil {
		list[corev1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	var st unix.Statfs_t
	if podDir != "" && unix.Statfs(podDir, &st) == nil {
		list[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(st.Blocks)*int64(st.Bsize), resource.BinarySI)
	}
	return list
}
