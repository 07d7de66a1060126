package manifests

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestSandboxHashPinned pins the sandbox hash scheme. If this test fails, every pod's
// sandbox would be recreated (and every container restarted) by an upgrade: do not
// update the expected value; add a new scheme instead.
func TestSandboxHashPinned(t *testing.T) {
	if got, want := SandboxHash(identityPod()), "657d0991d7b86a78"; got != want {
		t.Errorf("SandboxHash(web) = %q, want %q", got, want)
	}
}

// The sandbox hash changes with the fields a sandbox is made from, and with nothing
// else: an edit of a container's command or a label restarts that container alone, or
// nothing.
func TestSandboxHashFollowsTheFieldsOfTheSandbox(t *testing.T) {
	yes := true
	override := "other"
	withPort := func(p corev1.ContainerPort) func(*corev1.Pod) {
		return func(pod *corev1.Pod) { pod.Spec.Containers[0].Ports = append(pod.Spec.Containers[0].Ports, p) }
	}
	requests := func(cpu string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		}
	}
	tests := []struct {
		name    string
		from    func(*corev1.Pod) // the pod before the edit, when not identityPod's
		edit    func(*corev1.Pod)
		changed bool
	}{
		{"hostNetwork", nil, func(p *corev1.Pod) { p.Spec.HostNetwork = true }, true},
		{"hostIPC", nil, func(p *corev1.Pod) { p.Spec.HostIPC = true }, true},
		{"hostPID", nil, func(p *corev1.Pod) { p.Spec.HostPID = true }, true},
		{"shareProcessNamespace", nil, func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = &yes }, true},
		{"hostname", nil, func(p *corev1.Pod) { p.Spec.Hostname = "other" }, true},
		{"hostnameOverride", nil, func(p *corev1.Pod) { p.Spec.HostnameOverride = &override }, true},
		{"subdomain", nil, func(p *corev1.Pod) { p.Spec.Subdomain = "svc" }, true},
		{"hostAliases", nil, func(p *corev1.Pod) {
			p.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"db"}}}
		}, true},
		{"dnsPolicy", nil, func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone }, true},
		{"dnsConfig", nil, func(p *corev1.Pod) { p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.53"}} }, true},
		{"a hostPort", nil, withPort(corev1.ContainerPort{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}), true},
		{"the QoS class", nil, requests("100m"), true},
		{"sysctls", nil, func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}}
		}, true},
		{"a sysctl's value", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}}
		}, func(p *corev1.Pod) { p.Spec.SecurityContext.Sysctls[0].Value = "0" }, true},

		{"a port without hostPort", nil, withPort(corev1.ContainerPort{ContainerPort: 80, Protocol: corev1.ProtocolTCP}), false},
		{"a command", nil, func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"true"} }, false},
		{"an image", nil, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "busybox:1.37" }, false},
		{"a label", nil, func(p *corev1.Pod) { p.Labels = map[string]string{"tier": "back"} }, false},
		{"the UID", nil, func(p *corev1.Pod) { p.UID = "5b9a2f0e-1c1d-4c8e-9a53-0e2c1b7d9f11" }, false},
		{"the requests of a Burstable pod, which stays one", requests("100m"), requests("200m"), false},
		{"an empty securityContext", nil, func(p *corev1.Pod) { p.Spec.SecurityContext = &corev1.PodSecurityContext{} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, edited := identityPod(), identityPod()
			if tt.from != nil {
				tt.from(base)
				tt.from(edited)
			}
			tt.edit(edited)
			if changed := SandboxHash(edited) != SandboxHash(base); changed != tt.changed {
				t.Errorf("SandboxHash changed = %t after an edit of %s, want %t", changed, tt.name, tt.changed)
			}
		})
	}
}

// On the host's network a pod has no hostname or port mappings of its own: an edit of
// them changes nothing of its sandbox.
func TestSandboxHashOnTheHostNetworkIgnoresHostnameAndPorts(t *testing.T) {
	base, edited := identityPod(), identityPod()
	base.Spec.HostNetwork, edited.Spec.HostNetwork = true, true
	edited.Spec.Hostname = "other"
	edited.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80, Protocol: corev1.ProtocolTCP}}
	if SandboxHash(edited) != SandboxHash(base) {
		t.Error("SandboxHash of a host-network pod changed with its hostname and host ports, want unchanged")
	}
}

// A pod's containers share a PID namespace of its own with shareProcessNamespace, and
// the host's with hostPID, which wins should a pod hold both.
func TestSharesPIDNamespace(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		share   *bool
		hostPID bool
		want    bool
	}{
		{nil, false, false},
		{&no, false, false},
		{&yes, false, true},
		{&yes, true, false},
		{nil, true, false},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{ShareProcessNamespace: tc.share, HostPID: tc.hostPID}}
		if got := SharesPIDNamespace(pod); got != tc.want {
			share := "unset"
			if tc.share != nil {
				share = map[bool]string{true: "true", false: "false"}[*tc.share]
			}
			t.Errorf("SharesPIDNamespace(shareProcessNamespace %s, hostPID %v) = %v, want %v", share, tc.hostPID, got, tc.want)
		}
	}
}
