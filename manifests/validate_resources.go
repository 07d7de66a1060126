package manifests

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	hugePagesPrefix = "hugepages-"
	requestsPrefix  = "requests." // how quota names a request; an extended name must still be valid with it
	nativePrefix    = "kubernetes.io/"
)

var (
	containerResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	podResources       = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, hugePagesPrefix + "<size>"}
)

// validateResources checks requests and limits: known names, quantities that are not
// negative, requests within limits, and the stricter rules of resources that cannot be
// overcommitted (huge pages and extended resources). Claims are checked in
// validate_static.go.
func validateResources(r *corev1.ResourceRequirements, checkName func(corev1.ResourceName, *field.Path) field.ErrorList, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := fld.Child("limits"), fld.Child("requests")
	for _, name := range sortedNames(r.Limits) {
		errs = append(errs, validateQuantity(name, r.Limits[name], checkName, limPath.Key(string(name)))...)
	}
	for _, name := range sortedNames(r.Requests) {
		req, p := r.Requests[name], reqPath.Key(string(name))
		errs = append(errs, validateQuantity(name, req, checkName, p)...)
		limit, limited := r.Limits[name]
		switch {
		case !limited && !overcommittable(name):
			errs = append(errs, field.Required(limPath.Key(string(name)), "Limit must be set for non overcommitable resources"))
		case !limited:
		case !overcommittable(name) && req.Cmp(limit) != 0:
			errs = append(errs, field.Invalid(p, req.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case req.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(p, req.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	if hasResource(r, isHugePages) && !hasResource(r, isCPUOrMemory) {
		errs = append(errs, field.Forbidden(fld, "HugePages require cpu or memory"))
	}
	return errs
}

func validateQuantity(name corev1.ResourceName, q resource.Quantity, checkName func(corev1.ResourceName, *field.Path) field.ErrorList, fld *field.Path) field.ErrorList {
	errs := checkName(name, fld)
	if q.Sign() < 0 {
		errs = append(errs, field.Invalid(fld, q.String(), msgNegative))
	}
	if isExtended(name) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(fld, q.String(), "must be an integer"))
	}
	if isHugePages(name) {
		size, err := resource.ParseQuantity(strings.TrimPrefix(string(name), hugePagesPrefix))
		if err != nil || size.Sign() <= 0 || q.Value()%size.Value() != 0 {
			errs = append(errs, field.Invalid(fld, q.String(), fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name)))
		}
	}
	return errs
}

// containerResourceName accepts the standard container resources and huge pages, and
// otherwise only fully qualified extended resources (example.com/gpu).
func containerResourceName(name corev1.ResourceName, fld *field.Path) field.ErrorList {
	if msgs := content.IsLabelKey(string(name)); len(msgs) > 0 {
		return invalidMsgs(fld, name, msgs)
	}
	switch {
	case !strings.Contains(string(name), "/"):
		if !slices.Contains(containerResources, name) && !isHugePages(name) {
			return field.ErrorList{field.Invalid(fld, name, "must be a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-<size>) or a fully qualified extended resource")}
		}
	case !strings.Contains(string(name), nativePrefix) && !isExtended(name):
		return field.ErrorList{field.Invalid(fld, name, "doesn't follow extended resource name standard")}
	}
	return nil
}

// validatePodResources checks spec.resources as the apiserver does
// (validatePodResources, validatePodResourceConsistency): the names and quantities,
// requests within limits, pod-level requests no smaller than what the containers
// request together, and no container limited beyond the pod. Huge pages, which the
// API allows there, are refused: staticpod does not apply them to the pod's cgroup.
// The apiserver names a container's limit above the pod's at
// spec.resources.containers[i][name].limits; here it is named where it is set.
func validatePodResources(spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	r := spec.Resources
	if r == nil {
		return nil
	}
	resPath := fld.Child("resources")
	errs := validateResources(r, podResourceName, resPath)
	for _, l := range []struct {
		list corev1.ResourceList
		path *field.Path
	}{{r.Limits, resPath.Child("limits")}, {r.Requests, resPath.Child("requests")}} {
		for _, name := range sortedNames(l.list) {
			if isHugePages(name) {
				errs = append(errs, field.Forbidden(l.path.Key(string(name)), msgPodHugePages))
			}
		}
	}
	pod := &corev1.Pod{Spec: *spec}
	containers := ContainerRequests(pod)
	for _, name := range sortedNames(containers) {
		podReq, ok := r.Requests[name]
		if agg := containers[name]; ok && agg.Cmp(podReq) > 0 {
			errs = append(errs, field.Invalid(resPath.Child("requests").Key(string(name)), podReq.String(),
				fmt.Sprintf("must be greater than or equal to aggregate container requests of %s", agg.String())))
		}
	}
	for i, c := range spec.Containers {
		for _, name := range sortedNames(c.Resources.Limits) {
			podLim, ok := r.Limits[name]
			if lim := c.Resources.Limits[name]; ok && lim.Cmp(podLim) > 0 {
				errs = append(errs, field.Invalid(fld.Child("containers").Index(i).Child("resources", "limits").Key(string(name)), lim.String(),
					fmt.Sprintf("must be less than or equal to pod limits of %s", podLim.String())))
			}
		}
	}
	return errs
}

// podResourceName accepts the resources that spec.resources may set.
func podResourceName(name corev1.ResourceName, fld *field.Path) field.ErrorList {
	if name == corev1.ResourceCPU || name == corev1.ResourceMemory || isHugePages(name) {
		return nil
	}
	return field.ErrorList{field.NotSupported(fld, name, podResources)}
}

// isExtended reports a resource outside kubernetes.io that the kubelet does not manage
// itself: a device plugin's, say. Its quantities are whole and cannot be overcommitted.
func isExtended(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, nativePrefix) || strings.HasPrefix(s, requestsPrefix) {
		return false
	}
	return len(content.IsLabelKey(requestsPrefix+s)) == 0
}

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), hugePagesPrefix)
}

func isCPUOrMemory(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory
}

func overcommittable(name corev1.ResourceName) bool {
	return !isHugePages(name) && !isExtended(name)
}

func hasResource(r *corev1.ResourceRequirements, match func(corev1.ResourceName) bool) bool {
	for _, l := range []corev1.ResourceList{r.Limits, r.Requests} {
		for name := range l {
			if match(name) {
				return true
			}
		}
	}
	return false
}

// sortedNames keeps errors in a stable order across runs.
func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
