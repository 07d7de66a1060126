package spec

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// CDIDevicesAnnotation records in the spec the CDI devices device plugins named for
// the container, comma-separated, in the CDI annotation format (cdi.k8s.io/<name>)
// that containerd's CRI takes; the runtime resolved and applied them with the pod's
// own (Input.CDIDevices).
const CDIDevicesAnnotation = "cdi.k8s.io/staticpod-device-plugins"

// defaultDeviceAccess is the cgroup access a device gets when its plugin says none.
const defaultDeviceAccess = "rwm"

// PluginDevices applies what device plugins allocated to the container
// (in.Devices), as the CRI applies a container's devices, mounts and annotations:
// each device node resolved beforehand (in.DeviceNodes) is made at its container path
// and allowed in the device cgroup with the plugin's permissions; each mount is bound
// (read-only where the plugin says so); annotations join the spec's. Its environment
// is the process's (Process).
func PluginDevices(in Input) []oci.SpecOpts {
	a := in.Devices
	var opts []oci.SpecOpts
	if len(in.DeviceNodes) > 0 {
		opts = append(opts, withDeviceNodes(in.DeviceNodes))
	}
	if len(a.Mounts) > 0 {
		var mounts []specs.Mount
		for _, m := range a.Mounts {
			mounts = append(mounts, specs.Mount{Destination: m.ContainerPath, Type: bindType, Source: m.HostPath,
				Options: []string{bindRecursive, propagationPrivate, rwOption(m.ReadOnly)}})
		}
		opts = append(opts, withExtraMounts(mounts))
	}
	annotations := maps.Clone(a.Annotations)
	if len(a.CDIDevices) > 0 {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[CDIDevicesAnnotation] = strings.Join(a.CDIDevices, ",")
	}
	if len(annotations) > 0 {
		opts = append(opts, oci.WithAnnotations(annotations))
	}
	return opts
}

// DeviceNode is a host device node given to the container: the node as the host has
// it (type, numbers, mode, owner), Path its path in the container.
type DeviceNode struct {
	specs.LinuxDevice
	Access string // cgroup access: some of r, w, m
}

func withDeviceNodes(nodes []DeviceNode) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Resources == nil {
			s.Linux.Resources = &specs.LinuxResources{}
		}
		for _, n := range nodes {
			s.Linux.Devices = slices.DeleteFunc(s.Linux.Devices, func(d specs.LinuxDevice) bool { return d.Path == n.Path })
			s.Linux.Devices = append(s.Linux.Devices, n.LinuxDevice)
			major, minor := n.Major, n.Minor
			access := n.Access
			if access == "" {
				access = defaultDeviceAccess
			}
			s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{
				Allow: true, Type: n.Type, Major: &major, Minor: &minor, Access: access,
			})
		}
		return nil
	}
}

// withExtraMounts adds binds after those the spec has, replacing any at the same
// destination.
func withExtraMounts(mounts []specs.Mount) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		for _, m := range mounts {
			s.Mounts = slices.DeleteFunc(s.Mounts, func(o specs.Mount) bool { return o.Destination == m.Destination })
			s.Mounts = append(s.Mounts, m)
		}
		return nil
	}
}
