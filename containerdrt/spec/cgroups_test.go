package spec

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// cgroupView is what Cgroups decides: the options of the mount at /sys/fs/cgroup
// (nil without one), those of a tmpfs mounted there before it (nil without one), and
// whether the container has a cgroup namespace of its own.
type cgroupView struct {
	Options      []string
	Tmpfs        []string
	OwnNamespace bool
}

func cgroupViewOf(t *testing.T, s *specs.Spec) cgroupView {
	t.Helper()
	var v cgroupView
	for _, m := range s.Mounts {
		if m.Destination != cgroupRoot {
			continue
		}
		if m.Type == "tmpfs" && m.Source == "tmpfs" && v.Options == nil && v.Tmpfs == nil {
			v.Tmpfs = m.Options
			continue
		}
		if m.Type != cgroupMountType || m.Source != cgroupMountSource {
			t.Errorf("mount at %s = %+v, want type and source %q", cgroupRoot, m, cgroupMountType)
		}
		if v.Options != nil {
			t.Errorf("two mounts at %s: %v", cgroupRoot, s.Mounts)
		}
		v.Options = m.Options
	}
	if s.Linux != nil {
		v.OwnNamespace = slices.ContainsFunc(s.Linux.Namespaces, func(ns specs.LinuxNamespace) bool {
			return ns.Type == specs.CgroupNamespace && ns.Path == ""
		})
	}
	return v
}

func TestCgroupOpts(t *testing.T) {
	delegating := []string{"nsdelegate", "memory_recursiveprot"}
	for _, tc := range []struct {
		name       string
		host       CgroupHost
		privileged bool
		want       cgroupView
	}{
		{name: "v1: under a read-only tmpfs", host: CgroupHost{},
			want: cgroupView{Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}, Tmpfs: []string{"nosuid", "noexec", "nodev", "relatime", "mode=755", "ro"}}},
		{name: "v1 privileged: rw", host: CgroupHost{}, privileged: true,
			want: cgroupView{Options: []string{"nosuid", "noexec", "nodev", "relatime", "rw"}}},
		{name: "v2: own namespace, host options not repeated", host: CgroupHost{Unified: true, keep: delegating},
			want: cgroupView{Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}, OwnNamespace: true}},
		{name: "v2 privileged: host's namespace and its options", host: CgroupHost{Unified: true, keep: delegating}, privileged: true,
			want: cgroupView{Options: []string{"nosuid", "noexec", "nodev", "relatime", "rw", "nsdelegate", "memory_recursiveprot"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{})
			if tc.privileged {
				specContainerSC(in).Privileged = new(true)
			}
			got := cgroupViewOf(t, specFromOpts(t, "", Cgroups(in, tc.host)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Cgroups(%s) (-want +got):\n%s", tc.name, diff)
			}
		})
	}
}

// A volume mounted at /sys/fs/cgroup replaces the cgroupfs, as a volume replaces any
// default mount.
func TestCgroupfsReplacedByVolume(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{})
	opts := append(Cgroups(in, CgroupHost{}), withMounts([]specs.Mount{bindMount("/sys/fs/cgroup", cgroupRoot, true)}))
	s := specFromOpts(t, "", opts)
	var at []specs.Mount
	for _, m := range s.Mounts {
		if m.Destination == cgroupRoot {
			at = append(at, m)
		}
	}
	if len(at) != 1 || at[0].Type != bindType {
		t.Errorf("mounts at %s = %+v, want the volume's bind alone", cgroupRoot, at)
	}
}

// The spec staticpod builds for a container mounts its cgroups.
func TestContainerSpecMountsCgroupfs(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{})
	in.Container.Command = []string{"sh"}
	opts, err := Container(in)
	if err != nil {
		t.Fatalf("Container: %v", err)
	}
	got := cgroupViewOf(t, specFromOpts(t, specUsersRootfs(t), opts))
	if want := append(slices.Clone(cgroupMountOptions), optReadOnly); len(got.Options) < len(want) || !slices.Equal(got.Options[:len(want)], want) {
		t.Errorf("cgroupfs options = %v, want %v first", got.Options, want)
	}
	if got.OwnNamespace != HostCgroups().Unified {
		t.Errorf("own cgroup namespace = %v on a host with unified cgroups %v", got.OwnNamespace, HostCgroups().Unified)
	}
}

// A container joins its sandbox's shim; one of a pod without a sandbox has its own.
func TestContainerSpecShimGroup(t *testing.T) {
	for _, sandbox := range []string{"web-node1_0_0123abcd", ""} {
		in := specTestInput(ocispec.ImageConfig{})
		in.Container.Command = []string{"sh"}
		in.SandboxID = sandbox
		opts, err := Container(in)
		if err != nil {
			t.Fatalf("Container: %v", err)
		}
		group, ok := specFromOpts(t, specUsersRootfs(t), opts).Annotations[annotationShimGroup]
		if group != sandbox || ok != (sandbox != "") {
			t.Errorf("with sandbox %q: shim group %q (set: %v), want the sandbox's ID", sandbox, group, ok)
		}
	}
}
