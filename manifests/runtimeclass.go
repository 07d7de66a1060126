package manifests

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Runtime classes. A pod's runtimeClassName names a node.k8s.io/v1 RuntimeClass given
// as a document beside it in the same source, whose handler is the runtime handler the
// pod runs under; without such a document, the name is the handler itself. What
// handlers there are is the runtime's to know: an unknown one fails the pod's sandbox,
// as on the kubelet. The RuntimeClass's overhead.podFixed becomes the pod's
// spec.overhead (AdmitRuntimeClass), as the apiserver's RuntimeClass admission sets it,
// and the pod's cgroup is sized with it (PodLimits, PodRequests). Its scheduling has no
// effect: a static pod runs where its staticpod reads it.

// RuntimeHandler is the runtime handler pod runs under, from objs (the objects of its
// source): the handler of the RuntimeClass runtimeClassName names, or that name itself
// when no such RuntimeClass is beside the pod; "" for the runtime's default. class is
// the RuntimeClass found, nil when none is.
func RuntimeHandler(pod *corev1.Pod, objs Objects) (handler string, class *nodev1.RuntimeClass) {
	name := pod.Spec.RuntimeClassName
	if name == nil || *name == "" {
		return "", nil
	}
	if rc, ok := objs.RuntimeClasses[*name]; ok {
		return rc.Handler, rc
	}
	return *name, nil
}

// AdmitRuntimeClass sets the pod's spec.overhead to its RuntimeClass's
// overhead.podFixed when the pod sets none, as the apiserver's RuntimeClass admission
// does. References has refused an overhead that differs.
func AdmitRuntimeClass(pod *corev1.Pod, objs Objects) {
	_, rc := RuntimeHandler(pod, objs)
	if fixed := podFixed(rc); len(fixed) > 0 && pod.Spec.Overhead == nil {
		pod.Spec.Overhead = fixed.DeepCopy()
	}
}

// runtimeClassErrors checks the pod's spec.overhead against its RuntimeClass, as the
// apiserver's admission does: a pod may state the overhead only as its RuntimeClass
// sets it.
func runtimeClassErrors(pod *corev1.Pod, objs Objects) field.ErrorList {
	if len(pod.Spec.Overhead) == 0 || pod.Spec.RuntimeClassName == nil {
		return nil // validation refuses an overhead without a runtimeClassName
	}
	name := *pod.Spec.RuntimeClassName
	_, rc := RuntimeHandler(pod, objs)
	fld := field.NewPath("spec", "overhead")
	switch fixed := podFixed(rc); {
	case rc == nil:
		return field.ErrorList{field.Forbidden(fld, fmt.Sprintf("no RuntimeClass %s is defined beside the pod (in its source) to set it; %s", name, msgOverhead))}
	case !apiequality.Semantic.DeepEqual(fixed, pod.Spec.Overhead):
		return field.ErrorList{field.Forbidden(fld, fmt.Sprintf("it does not match the overhead.podFixed of RuntimeClass %s (%s); %s", name, resourceString(fixed), msgOverhead))}
	}
	return nil
}

func podFixed(rc *nodev1.RuntimeClass) corev1.ResourceList {
	if rc == nil || rc.Overhead == nil {
		return nil
	}
	return rc.Overhead.PodFixed
}

func resourceString(l corev1.ResourceList) string {
	if len(l) == 0 {
		return "none"
	}
	out := ""
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := l[name]; ok {
			if out != "" {
				out += ", "
			}
			out += string(name) + "=" + q.String()
		}
	}
	return out
}

// validateRuntimeClass checks a RuntimeClass as the apiserver does: a name, a handler
// that is a DNS label, and an overhead of CPU and memory that is not negative.
func validateRuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	fld := field.NewPath("metadata")
	var errs field.ErrorList
	if rc.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), ""))
	} else {
		errs = append(errs, invalidMsgs(fld.Child("name"), rc.Name, validation.IsDNS1123Subdomain(rc.Name))...)
	}
	if rc.Namespace != "" {
		errs = append(errs, field.Forbidden(fld.Child("namespace"), "not allowed on this type: a RuntimeClass is not namespaced"))
	}
	if rc.Handler == "" {
		errs = append(errs, field.Required(field.NewPath("handler"), ""))
	} else {
		errs = append(errs, invalidMsgs(field.NewPath("handler"), rc.Handler, validation.IsDNS1123Label(rc.Handler))...)
	}
	overhead := field.NewPath("overhead", "podFixed")
	for name, q := range podFixed(rc) {
		p := overhead.Key(string(name))
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			errs = append(errs, field.NotSupported(p, name, []string{string(corev1.ResourceCPU), string(corev1.ResourceMemory)}))
		}
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p, q.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}
