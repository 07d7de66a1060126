package restrict

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/staticpod/staticpod/manifests"
)

// ReasonForbidden is the kubelet's reason for a pod it refuses because it asks for
// something its source may not have: privileged containers or the host's network, PID
// or IPC namespace. staticpod also gives it to a pod that mounts a host path outside
// --allowed-host-paths.
const ReasonForbidden = "Forbidden"

// AllSources in a list of sources allows every source.
const AllSources = "*"

// Flags that restrict pods, named in the refusals they cause.
const (
	FlagPrivilegedSources  = "--privileged-sources"
	FlagHostNetworkSources = "--host-network-sources"
	FlagHostPIDSources     = "--host-pid-sources"
	FlagHostIPCSources     = "--host-ipc-sources"
	FlagAllowedHostPaths   = "--allowed-host-paths"
)

// Restrictions say what pods from each source may ask for, as the kubelet's
// --allow-privileged and privileged sources did, and which sysctls pods may set. Each
// list of sources holds manifests.SourceFile, SourceHTTP, SourceAPI or AllSources; a
// nil list allows every source. The zero value restricts no source, so that kubelet
// manifests keep working, and allows the sysctls safe on every kernel.
type Restrictions struct {
	PrivilegedSources  []string // may run privileged containers
	HostNetworkSources []string // may use the host's network namespace
	HostPIDSources     []string // may use the host's PID namespace
	HostIPCSources     []string // may use the host's IPC namespace
	// AllowedHostPaths are the absolute paths under which hostPath volumes may lie, for
	// every source; nil allows every path. A prefix matches whole path elements: /srv
	// allows /srv and /srv/data, not /srvx.
	AllowedHostPaths []string
	// Sysctls are the sysctls pods may set: the kernel's safe ones and those of
	// --allowed-unsafe-sysctls.
	Sysctls Sysctls
}

// Forbidden is what a pod asks for that its source may not have, or a sysctl it may
// not set.
type Forbidden struct {
	Reason string      // the kubelet's reason: ReasonForbidden when "", or ReasonSysctlForbidden
	Flag   string      // the flag that forbids it (FlagPrivilegedSources...), or that could allow it; "" for none
	Field  *field.Path // where the pod asks for it
	What   string      // what it asks for, in words: "a privileged container"
}

// Validate checks the lists: sources must be known, host paths absolute.
func (r Restrictions) Validate() error {
	for _, l := range []struct {
		flag    string
		sources []string
	}{
		{FlagPrivilegedSources, r.PrivilegedSources}, {FlagHostNetworkSources, r.HostNetworkSources},
		{FlagHostPIDSources, r.HostPIDSources}, {FlagHostIPCSources, r.HostIPCSources},
	} {
		for _, s := range l.sources {
			switch s {
			case manifests.SourceFile, manifests.SourceHTTP, manifests.SourceAPI, AllSources:
			default:
				return fmt.Errorf("%s: unknown source %q: use file, http, api or *", l.flag, s)
			}
		}
	}
	for _, p := range r.AllowedHostPaths {
		if !path.IsAbs(p) {
			return fmt.Errorf("%s: %q is not an absolute path", FlagAllowedHostPaths, p)
		}
	}
	_, err := r.Sysctls.allowlist()
	return err
}

// Check returns what pod asks for that its source may not have, or the first sysctl it
// may not set (checked first, as the kubelet admits sysctls before it looks at the
// source), nil when nothing. The source is the pod's kubernetes.io/config.source
// annotation; a pod without one is refused whatever a restricted list holds, as on the
// kubelet.
func (r Restrictions) Check(pod *corev1.Pod) *Forbidden {
	if f := r.Sysctls.checkSysctls(pod); f != nil {
		return f
	}
	src := manifests.SourceOf(pod)
	spec := field.NewPath("spec")
	if !allows(r.PrivilegedSources, src) {
		for _, list := range []struct {
			name       string
			containers []corev1.Container
		}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
			for i, c := range list.containers {
				if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
					f := spec.Child(list.name).Index(i).Child("securityContext", "privileged")
					return &Forbidden{Flag: FlagPrivilegedSources, Field: f, What: "a privileged container"}
				}
			}
		}
	}
	for _, ns := range []struct {
		on    bool
		list  []string
		flag  string
		field string
		what  string
	}{
		{pod.Spec.HostNetwork, r.HostNetworkSources, FlagHostNetworkSources, "hostNetwork", "the host's network"},
		{pod.Spec.HostPID, r.HostPIDSources, FlagHostPIDSources, "hostPID", "the host's PID namespace"},
		{pod.Spec.HostIPC, r.HostIPCSources, FlagHostIPCSources, "hostIPC", "the host's IPC namespace"},
	} {
		if ns.on && !allows(ns.list, src) {
			return &Forbidden{Flag: ns.flag, Field: spec.Child(ns.field), What: ns.what}
		}
	}
	if r.AllowedHostPaths == nil {
		return nil
	}
	for i, v := range pod.Spec.Volumes {
		if v.HostPath != nil && !underAny(v.HostPath.Path, r.AllowedHostPaths) {
			f := spec.Child("volumes").Index(i).Child("hostPath", "path")
			return &Forbidden{Flag: FlagAllowedHostPaths, Field: f, What: fmt.Sprintf("host path %s", v.HostPath.Path)}
		}
	}
	return nil
}

// Message is the field and the Detail: "spec.hostPID: the host's PID namespace is not
// allowed for pods from source "api" (--host-pid-sources)". A forbidden sysctl's says
// where the pod comes from too: "spec.securityContext.sysctls[0]: forbidden sysctl:
// "kernel.msgmax" not allowlisted (--allowed-unsafe-sysctls); pod default/a-node1 from
// file /m/a.yaml".
func (f *Forbidden) Message(pod *corev1.Pod) string {
	msg := f.Field.String() + ": " + f.Detail(pod)
	if f.Reason == ReasonSysctlForbidden && manifests.LocationOf(pod) != "" {
		msg += "; " + manifests.Origin(pod)
	}
	return msg
}

// Detail says what the pod asked for, from which source, and which flag refuses it.
func (f *Forbidden) Detail(pod *corev1.Pod) string {
	if f.Reason == ReasonSysctlForbidden {
		if f.Flag != "" {
			return f.What + " (" + f.Flag + ")"
		}
		return f.What
	}
	if f.Flag == FlagAllowedHostPaths {
		return fmt.Sprintf("%s is outside %s", f.What, FlagAllowedHostPaths)
	}
	src := manifests.SourceOf(pod)
	if src == "" {
		src = "unknown"
	}
	return fmt.Sprintf("%s is not allowed for pods from source %q (%s)", f.What, src, f.Flag)
}

// allows reports whether a list of sources allows source; nil allows every one.
func allows(sources []string, source string) bool {
	return sources == nil || slices.Contains(sources, AllSources) || (source != "" && slices.Contains(sources, source))
}

// underAny reports whether p, cleaned, is one of prefixes or lies under one. Cleaning
// resolves ".." textually; symbolic links are not followed (a link under an allowed
// prefix that points elsewhere is allowed: see the operator's guide).
func underAny(p string, prefixes []string) bool {
	if !path.IsAbs(p) {
		return false
	}
	p = path.Clean(p)
	for _, pre := range prefixes {
		pre = path.Clean(pre)
		if pre == "/" || p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}
