package restrict

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/sysctl"
)

// ReasonSysctlForbidden is the kubelet's reason for a pod it rejects because it sets a
// sysctl that is neither safe nor allowed by --allowed-unsafe-sysctls, or one of a
// namespace the pod shares with the host.
const ReasonSysctlForbidden = "SysctlForbidden"

// Sysctls say which sysctls pods may set: the safe ones of the kernel, and those
// AllowedUnsafe names, as the kubelet's --allowed-unsafe-sysctls does. The zero value
// allows the sysctls safe on every kernel.
type Sysctls struct {
	Kernel string // release of the kernel the pods run on (sysctl.HostKernel)
	// AllowedUnsafe are sysctls (kernel.msgmax) and prefixes ending in * (net.core.*)
	// allowed besides the safe ones; each must be of a namespace (see sysctl.NamespaceOf).
	AllowedUnsafe []string
}

// allowlist checks AllowedUnsafe and builds the allowlist: see sysctl.NewAllowlist.
func (s Sysctls) allowlist() (*sysctl.Allowlist, error) {
	return sysctl.NewAllowlist(s.Kernel, s.AllowedUnsafe)
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
	for i, set := range sc.Sysctls {
		problem, unlisted := a.Check(manifests.SysctlName(set.Name), pod.Spec.HostNetwork, pod.Spec.HostIPC)
		if problem == "" {
			continue
		}
		f := &Forbidden{Reason: ReasonSysctlForbidden, Field: fld.Index(i), What: "forbidden sysctl: " + problem}
		if unlisted {
			f.Flag = sysctl.FlagAllowedUnsafe
		}
		return f
	}
	return nil
}
