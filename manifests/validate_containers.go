package manifests

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// containerKind says which list a container is in: probes, lifecycle hooks and
// restartPolicy follow different rules in each.
type containerKind int

const (
	regularContainer containerKind = iota
	initContainer                  // runs to completion before the regular containers
	sidecarContainer               // an init container with restartPolicy: Always
)

var (
	pullPolicies          = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	terminationPolicies   = []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}
	portProtocols         = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	initRestartPolicies   = []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}
	mountPropagations     = []corev1.MountPropagationMode{corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone}
	recursiveReadOnlyMode = []corev1.RecursiveReadOnlyMode{corev1.RecursiveReadOnlyDisabled, corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible}
)

// validateContainers checks the init and regular containers of a pod. Names are unique
// across both lists. Host ports may not repeat among the regular containers, which run
// together, nor within one init container; init containers run one at a time.
func validateContainers(spec *corev1.PodSpec, vols map[string]corev1.VolumeSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(fld.Child("containers"), "a pod needs at least one container"))
	}
	names := map[string]bool{}
	initPath := fld.Child("initContainers")
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		kind := initContainer
		if IsSidecar(c) {
			kind = sidecarContainer
		}
		errs = append(errs, validateContainer(c, kind, spec, vols, initPath.Index(i))...)
		errs = append(errs, uniqueName(names, c.Name, initPath.Index(i).Child("name"))...)
		errs = append(errs, hostPortConflicts(map[string]bool{}, c, initPath.Index(i))...)
	}
	ctrPath := fld.Child("containers")
	hostPorts := map[string]bool{}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		errs = append(errs, validateContainer(c, regularContainer, spec, vols, ctrPath.Index(i))...)
		errs = append(errs, uniqueName(names, c.Name, ctrPath.Index(i).Child("name"))...)
		errs = append(errs, hostPortConflicts(hostPorts, c, ctrPath.Index(i))...)
	}
	return errs
}

func validateContainer(c *corev1.Container, kind containerKind, spec *corev1.PodSpec, vols map[string]corev1.VolumeSource, fld *field.Path) field.ErrorList {
	errs := dnsLabel(fld.Child("name"), c.Name, true)
	switch {
	case c.Image == "":
		errs = append(errs, field.Required(fld.Child("image"), ""))
	case strings.TrimSpace(c.Image) != c.Image:
		errs = append(errs, field.Invalid(fld.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	errs = append(errs, requiredEnum(fld.Child("imagePullPolicy"), c.ImagePullPolicy, pullPolicies)...)
	if c.TerminationMessagePath == "" {
		errs = append(errs, field.Required(fld.Child("terminationMessagePath"), ""))
	}
	errs = append(errs, requiredEnum(fld.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, terminationPolicies)...)
	errs = append(errs, validatePorts(c.Ports, spec.HostNetwork, fld.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, fld.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, fld.Child("envFrom"))...)
	errs = append(errs, validateMounts(c, vols, fld.Child("volumeMounts"))...)
	errs = append(errs, validateResources(&c.Resources, containerResourceName, fld.Child("resources"))...)
	errs = append(errs, validateSecurityContext(c.SecurityContext, hostUsers(spec), fld.Child("securityContext"))...)
	errs = append(errs, validateRestartPolicy(c, kind, fld)...)
	errs = append(errs, validateProbesAndHooks(c, kind, spec, fld)...)
	return errs
}

// msgRestartRules refuses per-container restart rules, which staticpod does not have.
const msgRestartRules = "per-container restart rules are not supported; use spec.restartPolicy"

// validateRestartPolicy allows restartPolicy only on init containers, where Always makes
// a sidecar. Per-container restart rules are not supported: spec.restartPolicy decides.
func validateRestartPolicy(c *corev1.Container, kind containerKind, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p := c.RestartPolicy; p != nil {
		if kind == regularContainer {
			errs = append(errs, field.Forbidden(fld.Child("restartPolicy"), "may not be set for non-init containers; use spec.restartPolicy"))
		} else {
			errs = append(errs, enum(fld.Child("restartPolicy"), *p, initRestartPolicies)...)
		}
	}
	if len(c.RestartPolicyRules) > 0 {
		errs = append(errs, field.Forbidden(fld.Child("restartPolicyRules"), msgRestartRules))
	}
	return errs
}

func uniqueName(seen map[string]bool, name string, fld *field.Path) field.ErrorList {
	if name == "" {
		return nil // reported as Required
	}
	if seen[name] {
		return field.ErrorList{field.Duplicate(fld, name)}
	}
	seen[name] = true
	return nil
}

func validatePorts(ports []corev1.ContainerPort, hostNetwork bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, port := range ports {
		p := fld.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) > 0 {
				errs = append(errs, invalidMsgs(p.Child("name"), port.Name, msgs)...)
			} else {
				errs = append(errs, uniqueName(names, port.Name, p.Child("name"))...)
			}
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(p.Child("containerPort"), ""))
		} else {
			errs = append(errs, invalidMsgs(p.Child("containerPort"), port.ContainerPort, validation.IsValidPortNum(int(port.ContainerPort)))...)
		}
		if port.HostPort != 0 {
			errs = append(errs, invalidMsgs(p.Child("hostPort"), port.HostPort, validation.IsValidPortNum(int(port.HostPort)))...)
			if hostNetwork && port.HostPort != port.ContainerPort {
				errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
			}
		}
		errs = append(errs, requiredEnum(p.Child("protocol"), port.Protocol, portProtocols)...)
	}
	return errs
}

// hostPortConflicts reports a host port (with its protocol and host IP) already in seen,
// and adds the container's own to it.
func hostPortConflicts(seen map[string]bool, c *corev1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, port := range c.Ports {
		if port.HostPort == 0 {
			continue
		}
		key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
		if seen[key] {
			errs = append(errs, field.Duplicate(fld.Child("ports").Index(i).Child("hostPort"), key))
		}
		seen[key] = true
	}
	return errs
}

func validateEnv(env []corev1.EnvVar, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		p := fld.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			errs = append(errs, invalidMsgs(p.Child("name"), e.Name, validation.IsRelaxedEnvVarName(e.Name))...)
		}
		if e.ValueFrom != nil {
			errs = append(errs, validateEnvSource(e, p.Child("valueFrom"))...)
		}
	}
	return errs
}

// validateEnvSource checks that valueFrom names exactly one source, and no value besides.
func validateEnvSource(e corev1.EnvVar, fld *field.Path) field.ErrorList {
	src := e.ValueFrom
	sources, errs := forbidEnvSources(src, fld)
	if r := src.ConfigMapKeyRef; r != nil {
		sources++
		errs = append(errs, validateKeyRef(r.Name, r.Key, fld.Child("configMapKeyRef"))...)
	}
	if r := src.SecretKeyRef; r != nil {
		sources++
		errs = append(errs, validateKeyRef(r.Name, r.Key, fld.Child("secretKeyRef"))...)
	}
	if src.FieldRef != nil {
		sources++
		errs = append(errs, validateFieldRef(src.FieldRef, envFieldPaths, fld.Child("fieldRef"))...)
	}
	if src.ResourceFieldRef != nil {
		sources++
		errs = append(errs, validateResourceFieldRef(src.ResourceFieldRef, false, fld.Child("resourceFieldRef"))...)
	}
	switch {
	case sources == 0:
		errs = append(errs, field.Invalid(fld, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case e.Value != "":
		errs = append(errs, field.Invalid(fld, "", "may not be specified when `value` is not empty"))
	case sources > 1:
		errs = append(errs, field.Invalid(fld, "", "may not have more than one field specified at a time"))
	}
	return errs
}

// validateMounts checks that each mount names a volume of the pod and an absolute path no
// other mount of the container uses. Sub-paths must stay inside the volume.
func validateMounts(c *corev1.Container, vols map[string]corev1.VolumeSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := map[string]bool{}
	for i, m := range c.VolumeMounts {
		p := fld.Index(i)
		if _, ok := vols[m.Name]; m.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else if !ok {
			errs = append(errs, field.NotFound(p.Child("name"), m.Name))
		}
		switch {
		case m.MountPath == "":
			errs = append(errs, field.Required(p.Child("mountPath"), ""))
		case !path.IsAbs(m.MountPath):
			errs = append(errs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be an absolute path"))
		case paths[m.MountPath]:
			errs = append(errs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths[m.MountPath] = true
		errs = append(errs, validateSubPath(m, p)...)
		errs = append(errs, validatePropagation(m, privileged(c), p)...)
	}
	return errs
}

func validateSubPath(m corev1.VolumeMount, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.SubPath != "" {
		errs = append(errs, relativePath(fld.Child("subPath"), m.SubPath)...)
	}
	if m.SubPathExpr != "" {
		if m.SubPath != "" {
			errs = append(errs, field.Invalid(fld.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
		}
		errs = append(errs, relativePath(fld.Child("subPathExpr"), m.SubPathExpr)...)
	}
	return errs
}

// validatePropagation checks mountPropagation and recursiveReadOnly, which constrain
// each other: a recursively read-only mount receives no mounts from the host.
func validatePropagation(m corev1.VolumeMount, privileged bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if prop := m.MountPropagation; prop != nil {
		errs = append(errs, enum(fld.Child("mountPropagation"), *prop, mountPropagations)...)
		if *prop == corev1.MountPropagationBidirectional && !privileged {
			errs = append(errs, field.Forbidden(fld.Child("mountPropagation"), "Bidirectional mount propagation is available only to privileged containers"))
		}
	}
	rro := m.RecursiveReadOnly
	if rro == nil || *rro == corev1.RecursiveReadOnlyDisabled {
		return errs
	}
	rroPath := fld.Child("recursiveReadOnly")
	if errs2 := enum(rroPath, *rro, recursiveReadOnlyMode); len(errs2) > 0 {
		return append(errs, errs2...)
	}
	if !m.ReadOnly {
		errs = append(errs, field.Forbidden(rroPath, "may only be specified when readOnly is true"))
	}
	if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
		errs = append(errs, field.Forbidden(rroPath, "may only be specified when mountPropagation is None or not specified"))
	}
	return errs
}

func privileged(c *corev1.Container) bool {
	return c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
}

// hostUsers says whether the pod runs in the host's user namespace, the default.
func hostUsers(spec *corev1.PodSpec) bool {
	return spec.HostUsers == nil || *spec.HostUsers
}
