package sysctl

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSafeFollowsTheKernel(t *testing.T) {
	always := []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
		"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"}
	keepalive := []string{"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
	all := append(append(append(slices.Clone(always), "net.ipv4.ip_local_reserved_ports"), keepalive...),
		"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
	for _, tt := range []struct {
		kernel string
		want   []string
	}{
		{"", always},
		{"not a version", always},
		{"3.10.0-1160.el7.x86_64", always},
		{"3.16.0", append(slices.Clone(always), "net.ipv4.ip_local_reserved_ports")},
		{"4.5.7", append(append(slices.Clone(always), "net.ipv4.ip_local_reserved_ports"), keepalive...)},
		{"4.14.300", append(append(append(slices.Clone(always), "net.ipv4.ip_local_reserved_ports"), keepalive...), "net.ipv4.tcp_fin_timeout")},
		{"4.15.0", all},
		{"6.18.0-1-amd64", all},
	} {
		got := Safe(tt.kernel)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tt.want))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Safe(%q) (-want +got):\n%s", tt.kernel, diff)
		}
	}
}

func TestAllowedUnsafeAreChecked(t *testing.T) {
	for _, tt := range []struct {
		allowed []string
		want    string // the error's start; "" when valid
	}{
		{[]string{"kernel.msgmax", "kernel.sem", "kernel.shm*", "fs.mqueue.*", "net.*", "net/ipv4/conf/*"}, ""},
		{[]string{"kernel.*"}, `--allowed-unsafe-sysctls: "kernel.*": the sysctls are not known to be namespaced`},
		{[]string{"vm.swappiness"}, `--allowed-unsafe-sysctls: "vm.swappiness": the sysctls are not known to be namespaced`},
		{[]string{"*"}, `--allowed-unsafe-sysctls: "*": the sysctls are not known to be namespaced`},
		{[]string{"Net.Core.*"}, `--allowed-unsafe-sysctls: "Net.Core.*" must have at most 253 characters and match regex`},
		{[]string{"net.*.rmem"}, `--allowed-unsafe-sysctls: "net.*.rmem" must have at most 253 characters and match regex`},
	} {
		got := ""
		if _, err := NewAllowlist("", tt.allowed); err != nil {
			got = err.Error()
		}
		if tt.want == "" && got != "" || !strings.HasPrefix(got, tt.want) {
			t.Errorf("NewAllowlist(%q) = %q, want %q...", tt.allowed, got, tt.want)
		}
	}
}
