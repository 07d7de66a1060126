package podnet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A pod without hostPorts is set up, and so torn down, without the portmap plugin,
// whose ADD and DEL would do nothing for it; a pod with hostPorts gets the whole list.
// A list without portmap is used as it is.
func TestPortmapOnlyForPodsWithHostPorts(t *testing.T) {
	dir := t.TempDir()
	const conflist = `{"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "bridge", "bridge": "n0", "mtu": 1400}, {"type": "portmap", "capabilities": {"portMappings": true}}]}`
	if err := os.WriteFile(filepath.Join(dir, "10-n.conflist"), []byte(conflist), 0o644); err != nil {
		t.Fatal(err)
	}
	n := New(Config{ConfDir: dir, BinDirs: []string{dir}}, slog.New(slog.DiscardHandler))
	plugins := func(pod *corev1.Pod) string {
		t.Helper()
		a, _, err := n.ForPod(context.Background(), pod)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Name    string
			Plugins []map[string]any
		}
		if err := json.Unmarshal(a.Record.Conf, &list); err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, p := range list.Plugins {
			types = append(types, fmt.Sprintf("%v %v", p["type"], p["mtu"]))
		}
		return list.Name + ": " + strings.Join(types, " ")
	}
	plain := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}
	published := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}}}}}
	if got := plugins(plain); got != "n: bridge 1400" {
		t.Errorf("a pod without hostPorts is set up with %q, want the bridge alone", got)
	}
	if got := plugins(published); got != "n: bridge 1400 portmap <nil>" {
		t.Errorf("a pod with hostPorts is set up with %q, want the whole list", got)
	}

	if err := os.WriteFile(filepath.Join(dir, "10-n.conflist"), []byte(`{"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "bridge", "bridge": "n0", "mtu": 1400}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Join(dir, "10-n.conflist"), time.Now().Add(time.Minute), time.Now().Add(time.Minute)) // read again
	if got := plugins(plain); got != "n: bridge 1400" {
		t.Errorf("without portmap in the list, a pod is set up with %q, want the list", got)
	}
}
