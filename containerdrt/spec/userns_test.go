package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
)

// TestUserNamespaceJoinsTheSandboxs checks that a container of a pod with a user
// namespace joins its sandbox's, by path, with the pod's mapping in the spec, and that
// one of a pod without stays in the host's.
func TestUserNamespaceJoinsTheSandboxs(t *testing.T) {
	for _, tt := range []struct {
		name   string
		hostID uint32
		want   []specs.LinuxNamespace
		maps   []specs.LinuxIDMapping
	}{
		{"host's", 0, nil, nil},
		{"pod's", 3 << 16, []specs.LinuxNamespace{{Type: specs.UserNamespace, Path: "/pins/user"}},
			[]specs.LinuxIDMapping{{ContainerID: 0, HostID: 3 << 16, Size: 65536}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{Cmd: []string{"sh"}})
			in.SandboxNS, in.UserNSHostID = "/pins", tt.hostID
			opts, err := Container(in)
			if err != nil {
				t.Fatal(err)
			}
			s := specFromOpts(t, specUsersRootfs(t), opts)
			var got []specs.LinuxNamespace
			for _, ns := range s.Linux.Namespaces {
				if ns.Type == specs.UserNamespace {
					got = append(got, ns)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("user namespaces (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.maps, s.Linux.UIDMappings); diff != "" {
				t.Errorf("UID mappings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.maps, s.Linux.GIDMappings); diff != "" {
				t.Errorf("GID mappings (-want +got):\n%s", diff)
			}
		})
	}
	in := specTestInput(ocispec.ImageConfig{Cmd: []string{"sh"}})
	in.UserNSHostID = 1 << 16
	if _, err := Container(in); err == nil {
		t.Error("Container with a user namespace and no sandbox succeeded")
	}
}

// TestProcMountUnmaskedDropsMasks checks that procMount: Unmasked leaves no masked or
// read-only paths, and that Default keeps containerd's.
func TestProcMountUnmaskedDropsMasks(t *testing.T) {
	for _, tt := range []struct {
		pm     corev1.ProcMountType
		masked bool
	}{{corev1.DefaultProcMount, true}, {corev1.UnmaskedProcMount, false}} {
		in := specTestInput(ocispec.ImageConfig{})
		in.Container.SecurityContext = &corev1.SecurityContext{ProcMount: &tt.pm}
		opts, err := Security(in)
		if err != nil {
			t.Fatal(err)
		}
		s := specFromOpts(t, specUsersRootfs(t), opts)
		if got := len(s.Linux.MaskedPaths) > 0 && len(s.Linux.ReadonlyPaths) > 0; got != tt.masked {
			t.Errorf("procMount %s: masked %v, read-only %v; want masks %v", tt.pm, s.Linux.MaskedPaths, s.Linux.ReadonlyPaths, tt.masked)
		}
	}
}
