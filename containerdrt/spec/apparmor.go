package spec

import (
	"errors"
	"fmt"

	"github.com/containerd/containerd/v2/contrib/apparmor"
	"github.com/containerd/containerd/v2/pkg/oci"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// DefaultAppArmorProfile is the name under which containerd's CRI loads its default
// AppArmor profile, and staticpod the same profile (containerd's contrib/apparmor):
// a container's /proc/<pid>/attr/current reads as on a kubelet with containerd.
const DefaultAppArmorProfile = "cri-containerd.apparmor.d"

// errAppArmorUnsupported is containerd CRI's error for a profile asked for on a host
// where it cannot confine: AppArmor off, or no apparmor_parser to load its profile.
var errAppArmorUnsupported = errors.New("apparmor is not supported")

// AppArmorProfile is the AppArmor profile container c of pod runs under ("" for
// none) and whether it is containerd's default, from the profile the pod asks for
// (manifests.AppArmorProfile: the kubelet's fields and annotation) with containerd
// CRI's rules. enabled says whether the host can confine (containerd's
// apparmor.HostSupports):
//   - not enabled: no profile, and an error for any profile but Unconfined (the
//     kubelet refuses such a pod before, on a host whose kernel has no AppArmor);
//   - RuntimeDefault, or no profile at all: containerd's default profile, except for a
//     privileged container, which is not confined;
//   - Localhost: the named profile, privileged or not; Unconfined: none.
//
// The profile must be loaded before the spec is built: the runtime loads the default
// one and checks that a Localhost one is.
func AppArmorProfile(pod *corev1.Pod, c *corev1.Container, enabled bool) (name string, runtimeDefault bool, err error) {
	p := manifests.AppArmorProfile(pod, c)
	if !enabled {
		if p != nil && p.Type != corev1.AppArmorProfileTypeUnconfined {
			return "", false, fmt.Errorf("container %q: appArmorProfile %s: %w", c.Name, p.Type, errAppArmorUnsupported)
		}
		return "", false, nil
	}
	switch {
	case p == nil || p.Type == corev1.AppArmorProfileTypeRuntimeDefault:
		if isPrivileged(c) {
			return "", false, nil
		}
		return DefaultAppArmorProfile, true, nil
	case p.Type == corev1.AppArmorProfileTypeLocalhost && p.LocalhostProfile != nil && *p.LocalhostProfile != "":
		return *p.LocalhostProfile, false, nil
	case p.Type == corev1.AppArmorProfileTypeUnconfined:
		return "", false, nil
	}
	return "", false, fmt.Errorf("container %q: appArmorProfile: unknown type %q or no localhostProfile", c.Name, p.Type)
}

// appArmorOpts run the process under in.AppArmorProfile, when it names one.
func appArmorOpts(in Input) []oci.SpecOpts {
	if in.AppArmorProfile == "" {
		return nil
	}
	return []oci.SpecOpts{apparmor.WithProfile(in.AppArmorProfile)}
}
