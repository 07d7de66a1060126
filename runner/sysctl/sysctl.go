package sysctl

import (
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/staticpod/staticpod/manifests"
)

// FlagAllowedUnsafe is the kubelet's flag that allows sysctls beyond the safe
// ones: names, or prefixes ending in "*".
const FlagAllowedUnsafe = "--allowed-unsafe-sysctls"

// Namespace is the kernel namespace a sysctl is set in.
type Namespace string

const (
	IPC     Namespace = "ipc"
	Net     Namespace = "net"
	Unknown Namespace = "" // not known to be namespaced: never allowed
)

// NamespaceOf says which namespace holds a sysctl (in dotted form), as the
// kubelet knows them: kernel.sem, kernel.shm*, kernel.msg* and fs.mqueue.* are the IPC
// namespace's, net.* the network namespace's.
func NamespaceOf(name string) Namespace {
	switch {
	case name == "kernel.sem", strings.HasPrefix(name, "kernel.shm"), strings.HasPrefix(name, "kernel.msg"),
		strings.HasPrefix(name, "fs.mqueue."):
		return IPC
	case strings.HasPrefix(name, "net."):
		return Net
	}
	return Unknown
}

// safe are the kubelet's safe sysctls: namespaced, and without effect on other
// pods. Those with a kernel are safe only from that kernel (major.minor) on, where the
// kernel made them per namespace; the others on every kernel.
var safe = []struct{ name, kernel string }{
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

// Safe are the safe sysctls on a kernel of release kernel (uname -r); when it is "" or
// does not parse, only those safe on every kernel, as the kubelet drops those it cannot
// tell.
func Safe(kernel string) []string {
	v, _ := version.ParseGeneric(kernel)
	var out []string
	for _, s := range safe {
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

// pattern is what --allowed-unsafe-sysctls takes: a sysctl name (segments
// separated by dots or slashes) whose last segment may end in *, as the kubelet's
// policy validation spells it.
var pattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$`)

const maxLength = 253

// Allowlist is the sysctls pods may set, each with its namespace: whole names, and
// prefixes (a pattern without its *).
type Allowlist struct {
	names    map[string]Namespace
	prefixes map[string]Namespace
}

// NewAllowlist checks allowedUnsafe, the sysctls (kernel.msgmax) and prefixes ending in
// * (net.core.*) of --allowed-unsafe-sysctls, and builds the allowlist: the safe
// sysctls of kernel and the allowed unsafe ones. A pattern that is no sysctl, or whose
// sysctls are of no known namespace (kernel.*, vm.swappiness), is an error, as on the
// kubelet.
func NewAllowlist(kernel string, allowedUnsafe []string) (*Allowlist, error) {
	a := &Allowlist{names: map[string]Namespace{}, prefixes: map[string]Namespace{}}
	for _, name := range Safe(kernel) {
		a.names[name] = NamespaceOf(name)
	}
	for _, p := range allowedUnsafe {
		if len(p) > maxLength || !pattern.MatchString(p) {
			return nil, fmt.Errorf("%s: %q must have at most %d characters and match regex %s", FlagAllowedUnsafe, p, maxLength, pattern)
		}
		p = manifests.SysctlName(p)
		prefix, isPrefix := strings.CutSuffix(p, "*")
		ns := NamespaceOf(prefix)
		if ns == Unknown {
			return nil, fmt.Errorf("%s: %q: the sysctls are not known to be namespaced (only kernel.sem, kernel.shm*, kernel.msg*, fs.mqueue.* and net.* are)", FlagAllowedUnsafe, p)
		}
		if isPrefix {
			a.prefixes[prefix] = ns
		} else {
			a.names[p] = ns
		}
	}
	return a, nil
}

// Check says why a pod may not set sysctl name (dotted), "" when it may: it is not
// allowlisted (unlisted is true: --allowed-unsafe-sysctls could allow it), or it is of
// a namespace the pod shares with the host.
func (a *Allowlist) Check(name string, hostNet, hostIPC bool) (problem string, unlisted bool) {
	ns, found := a.names[name]
	for prefix, pns := range a.prefixes {
		if !found && strings.HasPrefix(name, prefix) {
			ns, found = pns, true
		}
	}
	switch {
	case !found:
		return fmt.Sprintf("%q not allowlisted", name), true
	case ns == IPC && hostIPC, ns == Net && hostNet:
		return fmt.Sprintf("%q not allowed with host %s enabled", name, ns), false
	}
	return "", false
}
