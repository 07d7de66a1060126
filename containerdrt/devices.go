package containerdrt

import (
	"fmt"
	"slices"

	"github.com/containerd/containerd/v2/pkg/oci"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/devices"
)

// The devices a container gets come from device plugins (in.Devices: device nodes of
// the host, and CDI devices by name) and from its pod's cdi.k8s.io/ annotations (CDI
// devices). resolveDevices finds them all before the spec is built; spec.Container
// applies them.

// resolveDevices sets the device nodes (deviceNodes) and CDI devices (resolveCDI) of
// in's container: the pod's and its device plugins'.
func (r *Runtime) resolveDevices(in *spec.Input) error {
	nodes, err := deviceNodes(in.Devices)
	if err != nil {
		return err
	}
	in.DeviceNodes = nodes
	return r.resolveCDI(in, in.Devices.CDIDevices...)
}

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

// DefaultCDISpecDirs are where CDI specs are found unless configured: containerd's
// defaults (its CRI's cdi_spec_dirs), static specs first, then generated ones, which
// win a conflict.
var DefaultCDISpecDirs = []string{cdi.DefaultStaticDir, cdi.DefaultDynamicDir}

// newCDIRegistry is the registry of the CDI specs in dirs. It is refreshed by hand
// (readCDISpecs), not by the CDI library's watch of the directories: a spec written
// just before a pod that asks for its device is then always seen, where the watch
// would race the pod's creation, and no goroutine outlives the runtime.
func newCDIRegistry(dirs []string) *cdi.Cache {
	registry, _ := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false)) // its error is always nil
	return registry
}

// resolveCDI sets the CDI devices of in's container: those its pod's cdi.k8s.io/
// annotations request, then extra (fully-qualified CDI device names from elsewhere,
// such as a device plugin's allocation), each once; and, when there are any, reads
// the CDI specs anew (readCDISpecs) so that spec.Container applies them as the spec
// files say now. A malformed annotation, which validation refuses, fails with
// runner.ErrCreateConfig.
func (r *Runtime) resolveCDI(in *spec.Input, extra ...string) error {
	devices, err := manifests.CDIDevices(in.Pod)
	if err != nil {
		return fmt.Errorf("%w: %w", runner.ErrCreateConfig, err)
	}
	for _, d := range extra {
		if !slices.Contains(devices, d) {
			devices = append(devices, d)
		}
	}
	in.CDIDevices = devices
	if len(devices) > 0 {
		in.CDI = r.readCDISpecs()
	}
	return nil
}

// readCDISpecs reads the CDI spec directories anew and returns the registry. Specs
// that fail to load are left out; a device that only they define is refused by
// name, with their errors (see spec.CDIDevices), when a container asks for it.
func (r *Runtime) readCDISpecs() *cdi.Cache {
	if err := r.cdi.Refresh(); err != nil {
		r.log.Debug("read CDI specs", "dirs", r.cfg.CDISpecDirs, "err", err)
	}
	return r.cdi
}
