package spec

import (
	"testing"

	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestSysctls(t *testing.T) {
	for _, tt := range []struct {
		name    string
		sysctls []corev1.Sysctl
		want    map[string]string
	}{
		{"none", nil, nil},
		{"by dotted name", []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "80"}, {Name: "kernel.shm_rmid_forced", Value: "1"}},
			map[string]string{"net.ipv4.ip_unprivileged_port_start": "80", "kernel.shm_rmid_forced": "1"}},
		{"slashes made dots", []corev1.Sysctl{{Name: "net/ipv4/conf/eth0.100/rp_filter", Value: "2"}},
			map[string]string{"net.ipv4.conf.eth0/100.rp_filter": "2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{})
			if tt.sysctls != nil {
				in.Pod.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: tt.sysctls}
			}
			s := specFromOpts(t, "", []oci.SpecOpts{Sysctls(in)})
			if diff := cmp.Diff(tt.want, s.Linux.Sysctl); diff != "" {
				t.Errorf("Linux.Sysctl (-want +got):\n%s", diff)
			}
		})
	}
}
