package spec

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/runner"
)

// seccompOpt confines the container's syscalls as its seccompProfile asks, with the
// kubelet's rules (kuberuntime getSeccompProfile) and the CRI's profiles:
//   - RuntimeDefault: containerd's default profile;
//   - Localhost: the JSON profile at localhostProfile under the seccomp directory;
//   - Unconfined, or no profile: none. The kubelet's default without the SeccompDefault
//     feature, which staticpod has no flag for;
//   - a privileged container is never confined, whatever it asks (the CRI's rule).
//
// A Localhost profile is read here, so that a missing or broken file is reported as a
// configuration error before anything is created.
func seccompOpt(in Input, profile *corev1.SeccompProfile, privileged bool) (oci.SpecOpts, error) {
	if privileged || profile == nil {
		return oci.WithSeccompUnconfined, nil
	}
	switch profile.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		return seccomp.WithDefaultProfile(), nil
	case corev1.SeccompProfileTypeLocalhost:
		sp, err := localhostProfile(in.SeccompDir, profile.LocalhostProfile)
		if err != nil {
			return nil, fmt.Errorf("%w: container %q: seccompProfile: %w", runner.ErrCreateConfig, in.Container.Name, err)
		}
		return withSeccomp(sp), nil
	case corev1.SeccompProfileTypeUnconfined:
		return oci.WithSeccompUnconfined, nil
	}
	return nil, fmt.Errorf("%w: container %q: seccompProfile: unknown type %q", runner.ErrCreateConfig, in.Container.Name, profile.Type)
}

// localhostProfile reads and decodes the profile at name under dir. name must stay
// inside dir, symbolic links included.
func localhostProfile(dir string, name *string) (*specs.LinuxSeccomp, error) {
	switch {
	case name == nil || *name == "":
		return nil, fmt.Errorf("type Localhost needs a localhostProfile")
	case dir == "":
		return nil, fmt.Errorf("localhost profile %s: no seccomp profile directory is configured", *name)
	case !filepath.IsLocal(*name):
		return nil, fmt.Errorf("localhost profile %s: must be a relative path inside %s", *name, dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("localhost profile %s: %w", *name, err)
	}
	defer root.Close()
	data, err := root.ReadFile(*name)
	if err != nil {
		return nil, fmt.Errorf("localhost profile %s: %w", *name, err)
	}
	var sp specs.LinuxSeccomp
	if err := json.Unmarshal(data, &sp); err != nil {
		return nil, fmt.Errorf("localhost profile %s: decode %s: %w", *name, filepath.Join(dir, *name), err)
	}
	return &sp, nil
}

// withSeccomp sets a decoded profile.
func withSeccomp(sp *specs.LinuxSeccomp) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		s.Linux.Seccomp = sp
		return nil
	}
}
