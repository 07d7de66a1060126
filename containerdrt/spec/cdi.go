package spec

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/staticpod/staticpod/runner"
)

// cdiOpts applies the container's CDI devices (Input.CDIDevices) from Input.CDI, or
// refuses them all with runner.ErrCreateConfig naming those no spec defines.
func cdiOpts(in Input) ([]oci.SpecOpts, error) {
	if len(in.CDIDevices) == 0 {
		return nil, nil
	}
	if err := knownCDIDevices(in.CDI, in.Container.Name, in.CDIDevices); err != nil {
		return nil, err
	}
	return []oci.SpecOpts{CDIDevices(in.CDI, in.Container.Name, in.CDIDevices...)}, nil
}

// CDIDevices applies the CDI devices named (fully qualified, vendor.com/class=device)
// to a container's spec as the CDI specs that registry holds describe them: their
// device nodes (with the device cgroup's permission to use them), mounts, environment
// variables and hooks, the spec's own edits with its first device's. It must come
// after every option that sets the spec's environment, mounts or devices, and reads
// the registry as it is: the caller refreshes it first. A device the registry does
// not know fails the option with runner.ErrCreateConfig, naming it.
func CDIDevices(registry *cdi.Cache, container string, devices ...string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if len(devices) == 0 {
			return nil
		}
		if err := knownCDIDevices(registry, container, devices); err != nil {
			return err
		}
		if _, err := registry.InjectDevices(s, devices...); err != nil {
			return fmt.Errorf("%w: container %q: CDI devices %s: %w", runner.ErrCreateConfig, container, strings.Join(devices, ", "), err)
		}
		return nil
	}
}

// knownCDIDevices fails with runner.ErrCreateConfig naming each device of devices that
// no CDI spec of registry defines, and the spec files that could not be read, which
// may be why.
func knownCDIDevices(registry *cdi.Cache, container string, devices []string) error {
	var unknown []string
	for _, d := range devices {
		if registry == nil || registry.GetDevice(d) == nil {
			unknown = append(unknown, d)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unresolvable CDI devices %s", strings.Join(unknown, ", "))
	if registry != nil {
		msg += fmt.Sprintf(": no CDI spec in %s defines them", strings.Join(registry.GetSpecDirectories(), ", "))
		var broken []string
		for path, errs := range registry.GetErrors() {
			for _, err := range errs {
				broken = append(broken, fmt.Sprintf("%s: %v", path, err))
			}
		}
		if len(broken) > 0 {
			slices.Sort(broken)
			msg += "; specs that could not be read: " + strings.Join(broken, "; ")
		}
	}
	return fmt.Errorf("%w: container %q: %s", runner.ErrCreateConfig, container, msg)
}
