package containerdrt

import (
	"strings"
	"testing"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/runner"
)

// TestSysctlsInContainer checks that a pod's sysctls are set in its namespaces, as its
// containers read them from /proc/sys: in the pinned network and IPC namespaces, in
// those of a sandbox process (a pod that shares its PID namespace), and, on the host
// network, the IPC one in the container's own IPC namespace; and that the host's own
// values stay as they were.
func TestSysctlsInContainer(t *testing.T) {
	const (
		portStart = "net/ipv4/ip_unprivileged_port_start"
		rmid      = "kernel/shm_rmid_forced"
	)
	host := func(name string) string { return strings.TrimSpace(podtest.ReadFile(t, "/proc/sys/"+name)) }
	hostPort, hostRmid := host(portStart), host(rmid)
	// Values the host does not have, so that seeing them proves they were set.
	wantPort, wantRmid := "80", "1"
	if hostPort == wantPort {
		wantPort = "81"
	}
	if hostRmid == wantRmid {
		wantRmid = "0"
	}
	read := "cat /proc/sys/" + portStart + " /proc/sys/" + rmid
	for _, tt := range []struct {
		name, spec, sysctls, want string
	}{
		{"pinned namespaces", "", "[{name: net.ipv4.ip_unprivileged_port_start, value: '" + wantPort + "'}, {name: kernel.shm_rmid_forced, value: '" + wantRmid + "'}]",
			wantPort + " " + wantRmid},
		{"sandbox process", "  shareProcessNamespace: true\n", "[{name: net/ipv4/ip_unprivileged_port_start, value: '" + wantPort + "'}, {name: kernel.shm_rmid_forced, value: '" + wantRmid + "'}]",
			wantPort + " " + wantRmid},
		{"host network", "  hostNetwork: true\n", "[{name: kernel.shm_rmid_forced, value: '" + wantRmid + "'}]",
			hostPort + " " + wantRmid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRuntime(t)
			pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: tuned}\nspec:\n"+tt.spec+
				"  securityContext: {sysctls: "+tt.sysctls+"}\n"+
				"  containers:\n  - {name: c, image: "+testImage+", command: [sh, -c, '"+read+" > /dev/termination-log']}\n")
			cs := r.mustRunPod(t, pod)
			got := r.awaitState(t, cs["c"].ID, runner.StateExited)
			if got.ExitCode != 0 {
				t.Fatalf("container exited %d: %q", got.ExitCode, got.Message)
			}
			if fields := strings.Join(strings.Fields(got.Message), " "); fields != tt.want {
				t.Errorf("the container read %s, %s = %q, want %q", portStart, rmid, fields, tt.want)
			}
			if p, m := host(portStart), host(rmid); p != hostPort || m != hostRmid {
				t.Errorf("the host's %s, %s changed to %s, %s (were %s, %s)", portStart, rmid, p, m, hostPort, hostRmid)
			}
		})
	}
}
