package runner

import (
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/staticpod/staticpod/manifests"
)

// ReasonSysctlForbidden is the kubelet's reason for a pod it rejects because it sets a
// sysctl that is neither safe nor allowed by --allowed-unsafe-sysctls, or one of a
// namespace the pod shares with the host.
const ReasonSysctlForbidden = "SysctlForbidden"

// FlagAllowedUnsafeSysctls is the kubelet's flag that allows sysctls beyond the safe
// ones: names, or prefixes ending in "*".
const FlagAllowedUnsafeSysctls = "--allowed-unsafe-sysctls"

// sysctlNamespace is the kernel namespace a sysctl is set in.
type sysctlNamespace string

const (
	sysctlIPC     sysctlNamespace = "ipc"
	sysctlNet     sysctlNamespace = "net"
	sysctlUnknown sysctlNamespace = "" // not known to be namespaced: never allowed
)

// namespaceOfSysctl says which namespace holds a sysctl (in dotted form), as the
// kubelet knows them: kernel.sem, kernel.shm*, kernel.msg* and fs.mqueue.* are the IPC
// namespace's, net.* the network namespace's.
func namespaceOfSysctl(name string) sysctlNamespace {
	switch {
	case name == "kernel.sem", strings.HasPrefix(name, "kernel.shm"), strings.HasPrefix(name, "kernel.msg"),
		strings.HasPrefix(name, "fs.mqueue."):
		return sysctlIPC
	case strings.HasPrefix(name, "net."):
		return sysctlNet
	}
	return sysctlUnknown
}

// safeSysctls are the kubelet's safe sysctls: namespaced, and without effect on other
// pods. Those with a kernel are safe only from that kernel (major.minor) on, where the
// kernel made them per namespace; the others on every kernel.
var safeSysctls = []struct{ name, kernel string }{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_rmem", "4.15"},
	{"net.ipv4.tcp_wmem", "4.15"},
}

// SafeSysctls are the safe sysctls on a kernel of release kernel (uname -r); when it
// is "" or does not parse, only those safe on every kernel, as the kubelet drops those
// it cannot tell.
func SafeSysctls(kernel string) []string {
	v, _ := version.ParseGeneric(kernel)
	var out []string
	for _, s := range safeSysctls {
		if s.kernel == "" || v != nil && v.AtLeast(version.MustParseGeneric(s.kernel)) {
			out = append(out, s.name)
		}
	}
	return out
}

// HostKernel is the release of the running kernel (uname -r), "" when it cannot be read.
func HostKernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// Sysctls say which sysctls pods may set: the safe ones of the kernel, and those
// AllowedUnsafe names, as the kubelet's --allowed-unsafe-sysctls does. The zero value
// allows the sysctls safe on every kernel.
type Sysctls struct {
	Kernel string // release of the kernel the pods run on (HostKernel)
	// AllowedUnsafe are sysctls (kernel.msgmax) and prefixes ending in * (net.core.*)
	// allowed besides the safe ones; each must be of a namespace (see namespaceOfSysctl).
	AllowedUnsafe []string
}

// sysctlPattern is what --allowed-unsafe-sysctls takes: a sysctl name (segments
// separated by dots or slashes) whose last segment may end in *, as the kubelet's
// policy validation spells it.
var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$`)

const sysctlMaxLength = 253

// sysctlAllowlist is the sysctls pods may set, each with its namespace: whole names,
// and prefixes (a pattern without its *).
type sysctlAllowlist struct {
	names    map[string]sysctlNamespace
	prefixes map[string]sysctlNamespace
}

// allowlist checks AllowedUnsafe and builds the allowlist: the safe sysctls and the
// allowed unsafe ones. A pattern that is no sysctl, or whose sysctls are of no known
// namespace (kernel.*, vm.swappiness), is an error, as on the kubelet.
func (s Sysctls) allowlist() (*sysctlAllowlist, error) {
	a := &sysctlAllowlist{names: map[string]sysctlNamespace{}, prefixes: map[string]sysctlNamespace{}}
	for _, name := range SafeSysctls(s.Kernel) {
		a.names[name] = namespaceOfSysctl(name)
	}
	for _, p := range s.AllowedUnsafe {
		if len(p) > sysctlMaxLength || !sysctlPattern.MatchString(p) {
			return nil, fmt.Errorf("%s: %q must have at most %d characters and match regex %s", FlagAllowedUnsafeSysctls, p, sysctlMaxLength, sysctlPattern)
		}
		p = manifests.SysctlName(p)
		prefix, isPrefix := strings.CutSuffix(p, "*")
		ns := namespaceOfSysctl(prefix)
		if ns == sysctlUnknown {
			return nil, fmt.Errorf("%s: %q: the sysctls are not known to be namespaced (only kernel.sem, kernel.shm*, kernel.msg*, fs.mqueue.* and net.* are)", FlagAllowedUnsafeSysctls, p)
		}
		if isPrefix {
			a.prefixes[prefix] = ns
		} else {
			a.names[p] = ns
		}
	}
	return a, nil
}

// check says why a pod may not set sysctl name (dotted), "" when it may: it is not
// allowlisted (unlisted is true: --allowed-unsafe-sysctls could allow it), or it is of
// a namespace the pod shares with the host.
func (a *sysctlAllowlist) check(name string, hostNet, hostIPC bool) (problem string, unlisted bool) {
	ns, found := a.names[name]
	for prefix, pns := range a.prefixes {
		if !found && strings.HasPrefix(name, prefix) {
			ns, found = pns, true
		}
	}
	switch {
	case !found:
		return fmt.Sprintf("%q not allowlisted", name), true
	case ns == sysctlIPC && hostIPC, ns == sysctlNet && hostNet:
		return fmt.Sprintf("%q not allowed with host %s enabled", name, ns), false
	}
	return "", false
}

// checkSysctls returns the first sysctl of pod it may not set, nil when none.
func (s Sysctls) checkSysctls(pod *corev1.Pod) *Forbidden {
	sc := pod.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return nil
	}
	fld := field.NewPath("spec", "securityContext", "sysctls")
	a, err := s.allowlist()
	if err != nil {
		return &Forbidden{Reason: ReasonSysctlForbidden, Field: fld, What: err.Error()}
	}
	for i, sysctl := range sc.Sysctls {
		problem, unlisted := a.check(manifests.SysctlName(sysctl.Name), pod.Spec.HostNetwork, pod.Spec.HostIPC)
		if problem == "" {
			continue
		}
		f := &Forbidden{Reason: ReasonSysctlForbidden, Field: fld.Index(i), What: "forbidden sysctl: " + problem}
		if unlisted {
			f.Flag = FlagAllowedUnsafeSysctls
		}
		return f
	}
	return nil
}
