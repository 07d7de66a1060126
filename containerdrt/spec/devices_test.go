package spec

import (
	"context"
	"testing"

	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpod/staticpod/runner/devices"
)

func TestPluginDevicesMakesNodesAllowsThemAndBindsMounts(t *testing.T) {
	in := Input{
		Devices: devices.Allocation{
			Mounts:      []devices.Mount{{HostPath: "/opt/drv", ContainerPath: "/usr/lib/drv", ReadOnly: true}},
			Annotations: map[string]string{"vendor.com/x": "1"},
			CDIDevices:  []string{"vendor.com/gpu=0"},
		},
		DeviceNodes: []DeviceNode{{LinuxDevice: specs.LinuxDevice{Path: "/dev/widget0", Type: "c", Major: 1, Minor: 3}, Access: "rw"}},
	}
	s := &oci.Spec{}
	for _, o := range PluginDevices(in) {
		if err := o(context.Background(), nil, nil, s); err != nil {
			t.Fatal(err)
		}
	}
	major, minor := int64(1), int64(3)
	want := &oci.Spec{
		Annotations: map[string]string{"vendor.com/x": "1", CDIDevicesAnnotation: "vendor.com/gpu=0"},
		Mounts:      []specs.Mount{{Destination: "/usr/lib/drv", Type: "bind", Source: "/opt/drv", Options: []string{"rbind", "rprivate", "ro"}}},
		Linux: &specs.Linux{
			Devices:   []specs.LinuxDevice{{Path: "/dev/widget0", Type: "c", Major: 1, Minor: 3}},
			Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rw"}}},
		},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("PluginDevices (-want +got):\n%s", diff)
	}
}
