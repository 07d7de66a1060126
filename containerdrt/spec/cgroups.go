package spec

import (
	"slices"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
)

// The cgroup filesystem as containerd's CRI mounts it in a container (WithMounts).
const (
	cgroupMountType   = "cgroup" // runc mounts the container's own cgroups: cgroup2, or each v1 hierarchy
	cgroupMountSource = "cgroup"
)

// cgroupMountOptions are the CRI's options before ro or rw.
var cgroupMountOptions = []string{"nosuid", "noexec", "nodev", "relatime"}

// sharedCgroupOptions are the options of the host's cgroup2 mount that a mount made in
// the host's cgroup namespace must repeat: cgroup2 has one superblock, and mounting it
// without them would clear them for the whole host (systemd relies on nsdelegate).
// The CRI copies the same two.
var sharedCgroupOptions = []string{"nsdelegate", "memory_recursiveprot"}

// CgroupHost is what a container's view of its cgroups depends on in the host.
type CgroupHost struct {
	Unified bool     // cgroup v2 only: cgroupRoot holds cgroup.controllers
	keep    []string // sharedCgroupOptions the host's mount at cgroupRoot has
}

// Cgroups mounts the container's cgroups at /sys/fs/cgroup, read-only unless the
// container is privileged, and on a cgroup v2 host gives a container that is not
// privileged a cgroup namespace of its own, as containerd's CRI does. Runtimes that
// size themselves from their cgroup (the JVM, Go's GOMAXPROCS) then see their limits:
// containerd's default spec leaves /sys/fs/cgroup an empty directory. On cgroup v1
// the CRI keeps the host's namespace, and so does staticpod: runc mounts the
// container's own directory of each hierarchy at /sys/fs/cgroup/<hierarchy>, on a
// tmpfs that is read-only too unless the container is privileged.
//
// The mounts are added as default ones, so that a volume mounted at /sys/fs/cgroup
// replaces them (withMounts).
func Cgroups(in Input, host CgroupHost) []oci.SpecOpts {
	privileged := isPrivileged(in.Container)
	options := append(slices.Clone(cgroupMountOptions), rwOption(!privileged))
	ownNamespace := host.Unified && !privileged
	if !ownNamespace {
		options = append(options, host.keep...)
	}
	var mounts []specs.Mount
	if !host.Unified && !privileged {
		mounts = append(mounts, readOnlyCgroupV1Tmpfs())
	}
	mounts = append(mounts, specs.Mount{Destination: cgroupRoot, Type: cgroupMountType, Source: cgroupMountSource, Options: options})
	opts := []oci.SpecOpts{oci.WithMounts(mounts)}
	if ownNamespace {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.CgroupNamespace}))
	}
	return opts
}

// readOnlyCgroupV1Tmpfs makes the tmpfs at /sys/fs/cgroup of a container that is not
// privileged read-only on cgroup v1, as Docker and containerd's CRI meant to: both ask
// for a read-only cgroup mount, but runc (since 1.0) makes only the hierarchies'
// binds read-only and leaves the tmpfs under them writable. runc remounts every
// read-only tmpfs of the spec read-only once all mounts are made, at its path, where
// the mount on top is the tmpfs of the cgroup mount that follows: a read-only tmpfs
// mounted there first makes runc's remount hit it. The one below stays hidden.
func readOnlyCgroupV1Tmpfs() specs.Mount {
	return specs.Mount{
		Destination: cgroupRoot, Type: "tmpfs", Source: "tmpfs",
		Options: append(slices.Clone(cgroupMountOptions), "mode=755", optReadOnly), // runc's tmpfs, read-only
	}
}

// HostCgroups reads the host's cgroup setup, once: it does not change while staticpod
// runs. A host whose cgroupRoot cannot be read counts as cgroup v1 without options.
var HostCgroups = sync.OnceValue(func() CgroupHost {
	host := CgroupHost{Unified: cgroups.Unified()}
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(cgroupRoot))
	if err != nil || len(mounts) == 0 {
		return host
	}
	for opt := range strings.SplitSeq(mounts[len(mounts)-1].VFSOptions, ",") {
		if slices.Contains(sharedCgroupOptions, opt) {
			host.keep = append(host.keep, opt)
		}
	}
	return host
})
