package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// sandboxHashScheme is part of every SandboxHash; see the hash schemes in identity.go.
const sandboxHashScheme = "staticpod-sandbox-v1"

// sandboxFields are the fields of a pod that what it shares between its containers is
// made from, as the kubelet hands them to the runtime for a pod's sandbox
// (PodSandboxConfig): its namespaces, shared with the host or the pod's own; its
// hostname and the /etc/hosts and /etc/resolv.conf its containers share; the pod
// cgroup its QoS class places it in; and, on a pod network, the host ports mapped to
// it. Fields that mean nothing on the host's network are left empty there.
type sandboxFields struct {
	HostNetwork, HostIPC, HostPID, ShareProcessNamespace bool

	Name, Hostname, Subdomain string
	HostnameOverride          *string
	HostPorts                 []corev1.ContainerPort

	HostAliases []corev1.HostAlias
	DNSPolicy   corev1.DNSPolicy
	DNSConfig   *corev1.PodDNSConfig
	QOSClass    corev1.PodQOSClass

	// Sysctls are set in the pod's namespaces, which keep them: a pod whose sysctls
	// changed needs new ones. Omitted when empty, so that the hash of a pod without
	// sysctls is what it was before they were honoured.
	Sysctls []corev1.Sysctl `json:",omitempty"`

	// UserNamespace is set for hostUsers: false, whose pod's namespaces all belong to
	// a user namespace of its own. Omitted when false, for the same reason.
	UserNamespace bool `json:",omitempty"`
}

// SharesPIDNamespace reports whether the containers of pod share a PID namespace of
// the pod's own (shareProcessNamespace without hostPID), whose init is then the pod's
// sandbox process. Validation refuses shareProcessNamespace beside hostPID; should a pod
// hold both, the host's namespace is the one its containers are in.
func SharesPIDNamespace(pod *corev1.Pod) bool {
	share := pod.Spec.ShareProcessNamespace
	return share != nil && *share && !pod.Spec.HostPID
}

// SandboxHash is the hash of the fields of a defaulted pod that its sandbox is made
// from (sandboxFields). It is recorded on the sandbox, so that a pod edited under the
// UID its manifest gives gets a new sandbox, and every container is started again in
// it, when one of them changed, as the kubelet does when a pod's network namespace
// changed: fields of the sandbox cannot change under running containers.
func SandboxHash(pod *corev1.Pod) string {
	spec := &pod.Spec
	f := sandboxFields{
		HostNetwork: spec.HostNetwork, HostIPC: spec.HostIPC, HostPID: spec.HostPID,
		ShareProcessNamespace: SharesPIDNamespace(pod),
		HostAliases:           spec.HostAliases, DNSPolicy: spec.DNSPolicy, DNSConfig: spec.DNSConfig,
		QOSClass: QOSClass(pod), UserNamespace: !hostUsers(spec),
	}
	if sc := spec.SecurityContext; sc != nil {
		f.Sysctls = sc.Sysctls
	}
	if !spec.HostNetwork {
		f.Name, f.Hostname, f.Subdomain, f.HostnameOverride = pod.Name, spec.Hostname, spec.Subdomain, spec.HostnameOverride
		for _, c := range spec.Containers {
			for _, p := range c.Ports {
				if p.HostPort > 0 { // its name is no part of the mapping
					f.HostPorts = append(f.HostPorts, corev1.ContainerPort{HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: p.Protocol, HostIP: p.HostIP})
				}
			}
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", sandboxHashScheme)
	writeJSON(h, f)
	return hex.EncodeToString(h.Sum(nil))[:16]
}
