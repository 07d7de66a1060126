package runner

import "testing"

func TestContainerIDRoundTrip(t *testing.T) {
	s := ContainerID("containerd", "web-node1_main_0_0123abcd")
	if s != "containerd://web-node1_main_0_0123abcd" {
		t.Errorf("ContainerID = %q, want the kubelet's <type>://<id>", s)
	}
	if typ, id, ok := ParseContainerID(s); !ok || typ != "containerd" || id != "web-node1_main_0_0123abcd" {
		t.Errorf("ParseContainerID(%q) = %q, %q, %v", s, typ, id, ok)
	}
	for _, bad := range []string{"", "web-node1_main_0", "containerd://", "://id"} {
		if _, _, ok := ParseContainerID(bad); ok {
			t.Errorf("ParseContainerID(%q) succeeded", bad)
		}
	}
}
