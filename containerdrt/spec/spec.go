package spec

import (
	"fmt"
	"path/filepath"

	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpod/staticpod/manifests"
)

// annotationShimGroup in a container's spec names the group of containers that
// containerd's runc shim serves in one process (see ShimGroup).
const annotationShimGroup = "io.containerd.runc.v2.group"

// Container assembles a container's OCI spec options, applied after containerd's
// default spec: process, resources, security, cgroups (before mounts: a volume may
// replace the cgroupfs), mounts, then the pod's sysctls and namespaces. Each concern lives in its own file
// and is tested on its own; the integration tests prove the assembled result inside
// real containers. The host side of the mounts must be prepared (in.Prepared).
func Container(in Input) ([]oci.SpecOpts, error) {
	cgroups := func(in Input) ([]oci.SpecOpts, error) { return Cgroups(in, HostCgroups()), nil }
	var opts []oci.SpecOpts
	for _, build := range []func(Input) ([]oci.SpecOpts, error){Process, Resources, Security, cgroups, Mounts} {
		o, err := build(in)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o...)
	}
	if in.SandboxID != "" {
		opts = append(opts, ShimGroup(in.SandboxID))
	}
	opts = append(opts, Sysctls(in))
	opts = append(opts, PluginDevices(in)...)
	if in.UserNSHostID != 0 && in.SandboxNS == "" {
		return nil, fmt.Errorf("container %s: a user namespace of the pod's own needs its sandbox", in.Container.Name)
	}
	opts = append(opts, namespaceOpts(in)...)
	// CDI devices last, as containerd's CRI applies them: their environment, mounts and
	// device nodes add to what the options before set, which nothing after resets.
	devices, err := cdiOpts(in)
	if err != nil {
		return nil, err
	}
	return append(opts, devices...), nil
}

// UserNSLength is the number of IDs of a pod's user namespace.
const UserNSLength = 1 << 16

// UserNSMapping is the mapping of a pod's user namespace whose first host ID is hostID:
// container IDs 0..65535, users and groups alike.
func UserNSMapping(hostID uint32) []specs.LinuxIDMapping {
	return []specs.LinuxIDMapping{{ContainerID: 0, HostID: hostID, Size: UserNSLength}}
}

// userNamespace puts a container in its pod's user namespace, the sandbox's, with its
// mapping written in the spec too: runc maps the rootfs's and the mounts' owners by it.
func userNamespace(in Input) []oci.SpecOpts {
	if in.UserNSHostID == 0 {
		return nil
	}
	m := UserNSMapping(in.UserNSHostID)
	return []oci.SpecOpts{
		oci.WithUserNamespace(m, m),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.UserNamespace, Path: filepath.Join(in.SandboxNS, "user")}),
	}
}

// ShimGroup puts a container in its sandbox's shim: containerd's runc shim serves
// every container whose spec names the same group in one process, so a pod with a
// sandbox costs one shim however many containers it has and however often they
// restart. The group is the sandbox, which lives as long as its containers: a shim
// exits with the last task of its group, and a task that joins a group whose shim is
// exiting fails to start (seen on containerd 2.4), so a group must never outlive its
// first task. A new sandbox is a new group. Pods without a sandbox (on the host
// network) have nothing to hold a group's shim across the restart of their last
// container, and keep a shim per container.
func ShimGroup(sandboxID string) oci.SpecOpts {
	return oci.WithAnnotations(map[string]string{annotationShimGroup: sandboxID})
}

// namespaceOpts puts a container in its pod's namespaces: it joins the sandbox's
// network, IPC and UTS namespaces (and PID namespace when the pod shares one), or uses
// the host's where the pod asks for them. A pod on the host network has no sandbox
// unless it shares a PID namespace; each of its containers keeps its own IPC namespace
// unless hostIPC, the one documented difference from the kubelet.
func namespaceOpts(in Input) []oci.SpecOpts {
	spec := in.Pod.Spec
	join := func(t specs.LinuxNamespaceType, file string) oci.SpecOpts {
		return oci.WithLinuxNamespace(specs.LinuxNamespace{Type: t, Path: filepath.Join(in.SandboxNS, file)})
	}
	opts := userNamespace(in)
	switch {
	case spec.HostNetwork:
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace), oci.WithHostNamespace(specs.UTSNamespace))
	case in.SandboxNS != "":
		opts = append(opts, join(specs.NetworkNamespace, "net"), join(specs.UTSNamespace, "uts"))
	}
	switch {
	case spec.HostIPC:
		opts = append(opts, oci.WithHostNamespace(specs.IPCNamespace))
	case in.SandboxNS != "" && !spec.HostNetwork:
		opts = append(opts, join(specs.IPCNamespace, "ipc"))
	}
	switch {
	case spec.HostPID:
		opts = append(opts, oci.WithHostNamespace(specs.PIDNamespace))
	case manifests.SharesPIDNamespace(in.Pod) && in.SandboxNS != "":
		opts = append(opts, join(specs.PIDNamespace, "pid"))
	}
	return opts
}
