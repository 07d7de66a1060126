package containerdrt

import (
	"fmt"

	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/devices"
)

// deviceNodes finds on the host the device nodes device plugins gave the container:
// the spec makes each at its container path with the host node's type and numbers.
// A host path that is not a device fails the container's creation, with its path.
func deviceNodes(a devices.Allocation) ([]spec.DeviceNode, error) {
	var out []spec.DeviceNode
	for _, d := range a.Devices {
		dev, err := oci.DeviceFromPath(d.HostPath)
		if err != nil {
			return nil, fmt.Errorf("%w: device plugin device %s: %w", runner.ErrCreateConfig, d.HostPath, err)
		}
		dev.Path = d.ContainerPath
		out = append(out, spec.DeviceNode{LinuxDevice: *dev, Access: d.Permissions})
	}
	return out, nil
}
