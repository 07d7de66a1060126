package spec

import (
	"context"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpod/staticpod/manifests"
)

// Sysctls puts the pod's sysctls (securityContext.sysctls, admitted by the runner) into
// the container's spec, by their dotted names. runc writes them under /proc/sys in the
// container's init, once it is in the pod's namespaces and before the process runs, so
// that they land in the namespaces they belong to: net.* in the pod's network namespace
// (the pinned one, or the sandbox's), kernel.shm*, kernel.msg*, kernel.sem and
// fs.mqueue.* in its IPC namespace, or in the container's own where a pod on the host
// network has no shared one. containerd's CRI sets them once, on the sandbox's process;
// a pod with pinned namespaces has no such process, so every container of the pod
// writes the same values again as it starts, which changes nothing that is already
// set. A pod without sysctls leaves the spec as it is.
func Sysctls(in Input) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		sc := in.Pod.Spec.SecurityContext
		if sc == nil || len(sc.Sysctls) == 0 {
			return nil
		}
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Sysctl == nil {
			s.Linux.Sysctl = map[string]string{}
		}
		for _, sysctl := range sc.Sysctls {
			s.Linux.Sysctl[manifests.SysctlName(sysctl.Name)] = sysctl.Value
		}
		return nil
	}
}
