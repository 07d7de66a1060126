package manifests

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"tags.cncf.io/container-device-interface/pkg/parser"
)

// AnnotationCDIPrefix starts the keys of the annotations that request devices of the
// Container Device Interface: cdi.k8s.io/<any name>: <vendor>/<class>=<device>[,...],
// the format containerd's CRI reads (the CDI project's pkg/cdi AnnotationPrefix and
// ParseAnnotations). The name after the prefix only tells one request from another.
const AnnotationCDIPrefix = "cdi.k8s.io/"

// CDIDevices returns the fully-qualified CDI device names that pod's cdi.k8s.io/
// annotations request, in the order of their keys, each once. A static pod has no
// annotations but the pod's, so they apply to every container of the pod: a kubelet
// hands containerd a container's own annotations only, which a Pod cannot carry. A
// name that is not fully qualified is an error at its annotation, worded by the CDI
// project's parser.
func CDIDevices(pod *corev1.Pod) ([]string, error) {
	devices, errs := cdiDevices(pod.Annotations, field.NewPath("metadata", "annotations"))
	return devices, errs.ToAggregate()
}

// cdiDevices parses the cdi.k8s.io/ annotations: the devices they name, and an error at
// the annotation of each name that is not a qualified CDI device name. The value is
// split as the CDI library splits it (on commas, nothing trimmed), so that what
// validates here is what the library accepts.
func cdiDevices(annotations map[string]string, fld *field.Path) ([]string, field.ErrorList) {
	var keys []string
	for k := range annotations {
		if strings.HasPrefix(k, AnnotationCDIPrefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var devices []string
	var errs field.ErrorList
	for _, k := range keys {
		for d := range strings.SplitSeq(annotations[k], ",") {
			if _, _, _, err := parser.ParseQualifiedName(d); err != nil {
				errs = append(errs, field.Invalid(fld.Key(k), annotations[k], "want CDI device names, vendor.com/class=device, separated by commas: "+err.Error()))
				continue
			}
			if !slices.Contains(devices, d) {
				devices = append(devices, d)
			}
		}
	}
	return devices, errs
}

// validateCDIAnnotations checks that every cdi.k8s.io/ annotation names CDI devices
// fully qualified. Whether a device exists is the node's to say, when a container is
// created: the specs describing devices come and go with the hardware.
func validateCDIAnnotations(pod *corev1.Pod, fld *field.Path) field.ErrorList {
	_, errs := cdiDevices(pod.Annotations, fld)
	return errs
}
