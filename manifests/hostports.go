package manifests

import (
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// HostPort is a port of the node that a pod's container asks for: its hostPort (on the
// host's network, its containerPort, which defaulting copies there).
type HostPort struct {
	Protocol corev1.Protocol
	IP       string // hostIP; "" (or 0.0.0.0, ::) for every address of the node
	Port     int32
	Field    *field.Path // where the pod asks for it: spec.containers[0].ports[1].hostPort
}

func (p HostPort) String() string {
	ip := p.IP
	if ip == "" {
		ip = "0.0.0.0"
	}
	return fmt.Sprintf("%s %s", p.Protocol, net.JoinHostPort(ip, strconv.Itoa(int(p.Port))))
}

// Overlaps reports whether p and q cannot both be given: the same protocol and port on
// the same address, or on every address for either, as the scheduler's NodePorts
// filter decides.
func (p HostPort) Overlaps(q HostPort) bool {
	return p.Protocol == q.Protocol && p.Port == q.Port && (p.IP == q.IP || anyAddress(p.IP) || anyAddress(q.IP))
}

func anyAddress(ip string) bool {
	return ip == "" || ip == "0.0.0.0" || ip == "::"
}

// HostPorts are the host ports pod asks for, init containers' included.
func HostPorts(pod *corev1.Pod) []HostPort {
	var out []HostPort
	spec := field.NewPath("spec")
	for _, list := range []struct {
		path       *field.Path
		containers []corev1.Container
	}{{spec.Child("initContainers"), pod.Spec.InitContainers}, {spec.Child("containers"), pod.Spec.Containers}} {
		for i, c := range list.containers {
			for j, p := range c.Ports {
				if p.HostPort == 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, HostPort{Protocol: proto, IP: p.HostIP, Port: p.HostPort, Field: list.path.Index(i).Child("ports").Index(j).Child("hostPort")})
			}
		}
	}
	return out
}

// HostPortConflict returns the first host port of pod that one of other's overlaps,
// with other's.
func HostPortConflict(pod, other *corev1.Pod) (mine, theirs HostPort, ok bool) {
	others := HostPorts(other)
	for _, p := range HostPorts(pod) {
		for _, q := range others {
			if p.Overlaps(q) {
				return p, q, true
			}
		}
	}
	return HostPort{}, HostPort{}, false
}
