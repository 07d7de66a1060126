package podnet

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/google/go-cmp/cmp"
)

// The routes of /proc/net/route are read in the host's byte order; the default route
// is left out (every subnet is under it), and so are the default bridge's own.
func TestHostRoutes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "route")
	os.WriteFile(path, []byte("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"+
		"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"+
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"+
		"docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"+
		"staticpod0\t0000570A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"), 0o644)
	routes, err := hostRoutes(path, "staticpod0")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range routes {
		got = append(got, r.String())
	}
	if diff := cmp.Diff([]string{"192.0.2.0/24", "172.17.0.0/16"}, got); diff != "" {
		t.Errorf("hostRoutes (-want +got):\n%s", diff)
	}
}

// The default network takes the first subnet that no route covers or lies in.
func TestFreeSubnet(t *testing.T) {
	routes := func(cidrs ...string) []*net.IPNet {
		var out []*net.IPNet
		for _, c := range cidrs {
			_, n, _ := net.ParseCIDR(c)
			out = append(out, n)
		}
		return out
	}
	candidates := []string{"10.87.0.0/16", "10.187.0.0/16", "172.30.0.0/16"}
	tests := []struct {
		name   string
		routes []*net.IPNet
		want   string
	}{
		{"nothing in the way", routes("192.0.2.0/24"), "10.87.0.0/16"},
		{"a route inside the first", routes("10.87.3.0/24"), "10.187.0.0/16"},
		{"a route around the first two", routes("10.0.0.0/8"), "172.30.0.0/16"},
		{"all taken", routes("10.0.0.0/8", "172.16.0.0/12"), ""},
	}
	for _, tt := range tests {
		got, err := freeSubnet(candidates, tt.routes)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("%s: freeSubnet = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

// The default configuration is a valid CNI configuration list with the plugins it
// promises, and is written only where there is no configuration.
func TestWriteDefaultConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "net.d")
	b := Bridge{Name: "staticpod", Bridge: "staticpod0", Subnet: "10.87.0.0/16", DataDir: "/var/lib/staticpod/cni/networks"}
	path, err := WriteDefaultConfig(dir, b)
	if err != nil || path != filepath.Join(dir, defaultConfFile) {
		t.Fatalf("WriteDefaultConfig = %q, %v", path, err)
	}
	list, err := libcni.ConfListFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range list.Plugins {
		types = append(types, p.Network.Type)
	}
	if list.Name != "staticpod" || strings.Join(types, " ") != "bridge portmap" {
		t.Errorf("default network %q with plugins %v, want staticpod with bridge portmap (lo is staticpod's own)", list.Name, types)
	}
	var bridge struct {
		IsGateway bool `json:"isGateway"`
		IPMasq    bool `json:"ipMasq"`
		IPAM      struct {
			Ranges  [][]struct{ Subnet string } `json:"ranges"`
			DataDir string                      `json:"dataDir"`
		} `json:"ipam"`
	}
	if err := json.Unmarshal(list.Plugins[0].Bytes, &bridge); err != nil {
		t.Fatal(err)
	}
	if !bridge.IsGateway || bridge.IPMasq || bridge.IPAM.Ranges[0][0].Subnet != b.Subnet || bridge.IPAM.DataDir != b.DataDir {
		t.Errorf("bridge plugin: %+v, want the pods' gateway, on the subnet, without a masquerade of its own", bridge)
	}
	data, _ := os.ReadFile(path)
	if m, err := masqueradeOf(data); err != nil || m == nil || *m != (masquerade{network: "staticpod", subnet: b.Subnet}) {
		t.Errorf("the network's masquerade: %+v, %v; want staticpod's of %s", m, err, b.Subnet)
	}

	other := Bridge{Name: "other", Bridge: "other0", Subnet: "10.187.0.0/16"}
	if path, err := WriteDefaultConfig(dir, other); err != nil || path != "" {
		t.Errorf("over an existing configuration: WriteDefaultConfig = %q, %v; want nothing written", path, err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, defaultConfFile)); !strings.Contains(string(data), `"staticpod0"`) {
		t.Errorf("the existing configuration was changed:\n%s", data)
	}
}
