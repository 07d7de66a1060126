package devices

import (
	"maps"
	"slices"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Allocation is what device plugins allocated to one container, merged over its
// resources: the runtime applies it to the container's spec as the kubelet passes it
// to its runtime (device nodes, mounts, environment, annotations, CDI devices).
type Allocation struct {
	Devices     []Device          `json:"devices,omitempty"`
	Mounts      []Mount           `json:"mounts,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// CDIDevices are fully qualified CDI device names (vendor.com/class=name) the
	// plugin wants the runtime to resolve.
	CDIDevices []string `json:"cdiDevices,omitempty"`
}

// Device is a device node of the host given to the container.
type Device struct {
	HostPath      string `json:"hostPath"`
	ContainerPath string `json:"containerPath"`
	Permissions   string `json:"permissions,omitempty"` // cgroup access: r, w and m; "" for rwm
}

// Mount is a host path bound into the container.
type Mount struct {
	HostPath      string `json:"hostPath"`
	ContainerPath string `json:"containerPath"`
	ReadOnly      bool   `json:"readOnly,omitempty"`
}

// Empty reports whether a has nothing to apply.
func (a Allocation) Empty() bool {
	return len(a.Devices) == 0 && len(a.Mounts) == 0 && len(a.Env) == 0 && len(a.Annotations) == 0 && len(a.CDIDevices) == 0
}

// EnvList is a's environment as NAME=VALUE, sorted by name.
func (a Allocation) EnvList() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		out = append(out, k+"="+a.Env[k])
	}
	return out
}

// fromResponse is the allocation of a plugin's answer for one container.
func fromResponse(r *pluginapi.ContainerAllocateResponse) Allocation {
	var a Allocation
	if r == nil {
		return a
	}
	for _, d := range r.Devices {
		a.Devices = append(a.Devices, Device{HostPath: d.HostPath, ContainerPath: d.ContainerPath, Permissions: d.Permissions})
	}
	for _, m := range r.Mounts {
		a.Mounts = append(a.Mounts, Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: m.ReadOnly})
	}
	if len(r.Envs) > 0 {
		a.Env = maps.Clone(r.Envs)
	}
	if len(r.Annotations) > 0 {
		a.Annotations = maps.Clone(r.Annotations)
	}
	for _, d := range r.CdiDevices {
		a.CDIDevices = append(a.CDIDevices, d.Name)
	}
	return a
}

// merge adds b to a. Where two resources set the same variable or annotation, the
// later resource's (by name) wins, as the kubelet's map of them does.
func (a *Allocation) merge(b Allocation) {
	a.Devices = append(a.Devices, b.Devices...)
	a.Mounts = append(a.Mounts, b.Mounts...)
	a.CDIDevices = append(a.CDIDevices, b.CDIDevices...)
	if len(b.Env) > 0 && a.Env == nil {
		a.Env = map[string]string{}
	}
	maps.Copy(a.Env, b.Env)
	if len(b.Annotations) > 0 && a.Annotations == nil {
		a.Annotations = map[string]string{}
	}
	maps.Copy(a.Annotations, b.Annotations)
}
