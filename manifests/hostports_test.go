package manifests

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestHostPortOverlaps(t *testing.T) {
	tcp := func(ip string, port int32) HostPort {
		return HostPort{Protocol: corev1.ProtocolTCP, IP: ip, Port: port}
	}
	udp := func(ip string, port int32) HostPort {
		return HostPort{Protocol: corev1.ProtocolUDP, IP: ip, Port: port}
	}
	tests := []struct {
		a, b HostPort
		want bool
	}{
		{tcp("", 80), tcp("", 80), true},
		{tcp("", 80), tcp("127.0.0.1", 80), true},
		{tcp("0.0.0.0", 80), tcp("192.0.2.2", 80), true},
		{tcp("::", 80), tcp("192.0.2.2", 80), true},
		{tcp("127.0.0.1", 80), tcp("127.0.0.1", 80), true},
		{tcp("127.0.0.1", 80), tcp("192.0.2.2", 80), false},
		{tcp("", 80), udp("", 80), false},
		{tcp("", 80), tcp("", 81), false},
	}
	for _, tt := range tests {
		if got := tt.a.Overlaps(tt.b); got != tt.want || tt.b.Overlaps(tt.a) != tt.want {
			t.Errorf("%s overlaps %s = %v, want %v both ways", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestHostPortConflict(t *testing.T) {
	pod := func(ports ...corev1.ContainerPort) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init"}},
			Containers:     []corev1.Container{{Name: "a"}, {Name: "b", Ports: ports}},
		}}
	}
	web := pod(corev1.ContainerPort{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP})
	dns := pod(corev1.ContainerPort{ContainerPort: 53, HostPort: 8080, Protocol: corev1.ProtocolUDP},
		corev1.ContainerPort{ContainerPort: 81, HostPort: 8080, HostIP: "127.0.0.1", Protocol: corev1.ProtocolTCP})
	mine, theirs, ok := HostPortConflict(dns, web)
	if !ok || mine.Field.String() != "spec.containers[1].ports[1].hostPort" || mine.String() != "TCP 127.0.0.1:8080" || theirs.String() != "TCP 0.0.0.0:8080" {
		t.Errorf("HostPortConflict = %v (%v), %v, %v", mine, mine.Field, theirs, ok)
	}
	if _, _, ok := HostPortConflict(pod(corev1.ContainerPort{ContainerPort: 80, HostPort: 9090, Protocol: corev1.ProtocolTCP}), web); ok {
		t.Error("different host ports conflict")
	}
}
