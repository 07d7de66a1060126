package bench

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// A replayed container makes the network, UTS and IPC namespaces staticpod's joined,
// and keeps the rest of its namespaces as they were.
func TestReplayMakesThePodsNamespacesAnew(t *testing.T) {
	nss := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace},
		{Type: specs.NetworkNamespace, Path: "/run/staticpod/pins/p_0_1/net"},
		{Type: specs.UTSNamespace, Path: "/run/staticpod/pins/p_0_1/uts"},
		{Type: specs.IPCNamespace, Path: "/proc/42/ns/ipc"},
		{Type: specs.MountNamespace},
		{Type: specs.UserNamespace, Path: "/proc/42/ns/user"},
	}
	ownNamespaces(nss)
	want := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace},
		{Type: specs.NetworkNamespace},
		{Type: specs.UTSNamespace},
		{Type: specs.IPCNamespace},
		{Type: specs.MountNamespace},
		{Type: specs.UserNamespace, Path: "/proc/42/ns/user"},
	}
	if !slices.Equal(nss, want) {
		t.Errorf("namespaces %+v, want %+v", nss, want)
	}
}
