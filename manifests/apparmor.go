package manifests

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AppArmor as the kubelet reads it: a container's appArmorProfile, else the deprecated
// annotation container.apparmor.security.beta.kubernetes.io/<container> (static pods
// never had the apiserver copy it into the field, so the kubelet falls back to it),
// else the pod's appArmorProfile. The annotation's values are runtime/default,
// unconfined and localhost/<profile>.

// AppArmorProfile is the AppArmor profile container c of pod asks for, nil when it
// asks for none (the runtime then chooses: containerd's default profile where AppArmor
// is enabled), as the kubelet's apparmor.GetProfile resolves it.
func AppArmorProfile(pod *corev1.Pod, c *corev1.Container) *corev1.AppArmorProfile {
	if sc := c.SecurityContext; sc != nil && sc.AppArmorProfile != nil {
		return sc.AppArmorProfile
	}
	if v, ok := pod.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok {
		if p := appArmorFromAnnotation(v); p != nil {
			return p
		}
	}
	if psc := pod.Spec.SecurityContext; psc != nil && psc.AppArmorProfile != nil {
		return psc.AppArmorProfile
	}
	return nil
}

// AppArmorRequired says whether pod asks for AppArmor confinement anywhere: a profile
// other than Unconfined in a field or an annotation. The kubelet refuses such a pod on
// a host without AppArmor.
func AppArmorRequired(pod *corev1.Pod) bool {
	confined := func(p *corev1.AppArmorProfile) bool {
		return p != nil && p.Type != corev1.AppArmorProfileTypeUnconfined
	}
	if psc := pod.Spec.SecurityContext; psc != nil && confined(psc.AppArmorProfile) {
		return true
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.SecurityContext != nil && confined(c.SecurityContext.AppArmorProfile) {
				return true
			}
		}
	}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && v != corev1.DeprecatedAppArmorBetaProfileNameUnconfined {
			return true
		}
	}
	return false
}

// appArmorFromAnnotation reads an annotation's value; nil for a value it does not know
// (validation refuses those).
func appArmorFromAnnotation(v string) *corev1.AppArmorProfile {
	switch {
	case v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
	case v == corev1.DeprecatedAppArmorBetaProfileNameUnconfined:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	case strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix):
		name := strings.TrimPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
	}
	return nil
}

// validateAppArmorAnnotations checks the deprecated AppArmor annotations as the
// apiserver's validation does (each names a container of the pod and holds a known
// value), where the kubelet's admission would refuse an empty localhost profile, and
// that an annotation agrees with the field that also applies to its container.
func validateAppArmorAnnotations(pod *corev1.Pod, fld *field.Path) field.ErrorList {
	var keys []string
	for k := range pod.Annotations {
		if strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var errs field.ErrorList
	for _, k := range keys {
		v, p := pod.Annotations[k], fld.Key(k)
		name := strings.TrimPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix)
		c, cPath := containerNamed(&pod.Spec, name)
		if c == nil {
			errs = append(errs, field.Invalid(p, name, "container not found"))
		}
		ap := appArmorFromAnnotation(v)
		switch {
		case ap == nil:
			errs = append(errs, field.Invalid(p, v, fmt.Sprintf("invalid AppArmor profile name: %q: use %s, %s or %s<profile>", v,
				corev1.DeprecatedAppArmorBetaProfileRuntimeDefault, corev1.DeprecatedAppArmorBetaProfileNameUnconfined, corev1.DeprecatedAppArmorBetaProfileNamePrefix)))
			continue
		case ap.Type == corev1.AppArmorProfileTypeLocalhost && strings.TrimSpace(*ap.LocalhostProfile) == "":
			errs = append(errs, field.Invalid(p, v, "invalid empty AppArmor profile name"))
			continue
		}
		if c != nil {
			errs = append(errs, appArmorFieldMatches(pod, c, ap, cPath)...)
		}
	}
	return errs
}

// appArmorFieldMatches refuses an annotation that says otherwise than the field that
// applies to its container (the container's, else the pod's), as the apiserver refuses
// such a pod at creation.
func appArmorFieldMatches(pod *corev1.Pod, c *corev1.Container, ann *corev1.AppArmorProfile, cPath *field.Path) field.ErrorList {
	f := (*corev1.AppArmorProfile)(nil)
	if psc := pod.Spec.SecurityContext; psc != nil {
		f = psc.AppArmorProfile
	}
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		f = c.SecurityContext.AppArmorProfile
	}
	if f == nil {
		return nil
	}
	p := cPath.Child("securityContext", "appArmorProfile")
	switch {
	case f.Type != ann.Type:
		return field.ErrorList{field.Forbidden(p.Child("type"), "apparmor type in annotation and field must match")}
	case f.Type == corev1.AppArmorProfileTypeLocalhost && (f.LocalhostProfile == nil || *f.LocalhostProfile != *ann.LocalhostProfile):
		return field.ErrorList{field.Forbidden(p.Child("localhostProfile"), "apparmor profile in annotation and field must match")}
	}
	return nil
}

// containerNamed is the init or regular container of spec named name, and its path.
func containerNamed(spec *corev1.PodSpec, name string) (*corev1.Container, *field.Path) {
	for _, list := range []struct {
		name       string
		containers []corev1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range list.containers {
			if list.containers[i].Name == name {
				return &list.containers[i], field.NewPath("spec").Child(list.name).Index(i)
			}
		}
	}
	return nil, nil
}
