package podnet

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// hostPorts of the app containers go to portmap, lower-cased, each once; ports without
// a hostPort do not.
func TestPortMappings(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Ports: []corev1.ContainerPort{
			{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP},
			{ContainerPort: 53, HostPort: 5353, Protocol: corev1.ProtocolUDP, HostIP: "127.0.0.1"},
			{ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
			{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP},
		}},
		{Name: "b", Ports: []corev1.ContainerPort{{ContainerPort: 443, HostPort: 8443}}},
	}}}
	want := []PortMapping{
		{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
		{HostPort: 5353, ContainerPort: 53, Protocol: "udp", HostIP: "127.0.0.1"},
		{HostPort: 8443, ContainerPort: 443, Protocol: "tcp"},
	}
	if diff := cmp.Diff(want, portMappings(pod)); diff != "" {
		t.Errorf("portMappings (-want +got):\n%s", diff)
	}
}

// A network record fits in a label: whole when it can, without its configuration
// otherwise (the pin directory keeps that).
func TestRecordLabel(t *testing.T) {
	const room = 4000 // containerd's 4096 bytes of a label less its key
	rec := Record{Conf: json.RawMessage(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"}]}`), Namespace: "default", Name: "web-node1", UID: "u"}
	var got Record
	if err := json.Unmarshal([]byte(rec.Label(room)), &got); err != nil || string(got.Conf) != string(rec.Conf) {
		t.Errorf("a small record's label: %+v, %v", got, err)
	}
	rec.Conf = json.RawMessage(`{"name":"` + strings.Repeat("x", room) + `"}`)
	label := rec.Label(room)
	if len(label) > room {
		t.Fatalf("label of %d bytes, over its room of %d", len(label), room)
	}
	got = Record{}
	if err := json.Unmarshal([]byte(label), &got); err != nil || len(got.Conf) != 0 || got.Name != "web-node1" {
		t.Errorf("a large record's label: %+v, %v; want it without the configuration", got, err)
	}
}
