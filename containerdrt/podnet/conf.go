package podnet

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/staticpod/staticpod/internal/atomicfile"
)

// The default pod network that `staticpod run --cni-default-bridge` configures where
// there is none: a bridge on the host with the pods' veths, addresses from a private
// subnet that no route of the host covers (host-local, its allocations under the root
// dir), masquerade for what pods send out (staticpod's own for the whole network, see
// masquerade.go) and hostPorts through portmap. It has no
// loopback plugin: staticpod brings a pod's lo up itself when it makes the pod's
// namespaces (package pins, and the sandbox process), and the plugin cost every pod
// two more executions (its ADD and its DEL, about 4 ms of CPU each).
const (
	DefaultNetworkName = "staticpod"
	DefaultBridgeName  = "staticpod0"
	// defaultConfFile sorts early, so that it is the first network of the directory.
	defaultConfFile = "10-staticpod.conflist"
)

// defaultSubnets are the subnets the default network may take, in order of preference:
// private ranges that other container runtimes' defaults (Docker's 172.17.0.0/16,
// podman's and containerd's 10.88.0.0/16, CRI-O's 10.85.0.0/16, Kubernetes' 10.96 and
// 10.244) leave alone.
var defaultSubnets = []string{"10.87.0.0/16", "10.187.0.0/16", "172.30.0.0/16", "192.168.187.0/24"}

// Bridge is a pod network on a bridge, as the default one is configured.
type Bridge struct {
	Name    string // the network's name
	Bridge  string // the bridge device
	Subnet  string // the pods' addresses; the bridge takes the first
	DataDir string // host-local's allocations
}

// DefaultBridge is the default pod network for a root dir. Its subnet is the one its
// bridge has, if the bridge is there (made for an earlier configuration: the bridge
// plugin never removes it, and refuses to give it another address), else the first of
// defaultSubnets that overlaps no route of this host.
func DefaultBridge(rootDir string) (Bridge, error) {
	b := Bridge{Name: DefaultNetworkName, Bridge: DefaultBridgeName, DataDir: filepath.Join(rootDir, "cni", "networks")}
	if b.Subnet = interfaceSubnet(DefaultBridgeName); b.Subnet != "" {
		return b, nil
	}
	routes, err := hostRoutes("/proc/net/route", DefaultBridgeName)
	if err != nil {
		return Bridge{}, err
	}
	if b.Subnet, err = freeSubnet(defaultSubnets, routes); err != nil {
		return Bridge{}, err
	}
	return b, nil
}

// interfaceSubnet is the IPv4 subnet of the interface's first address, "" if it has
// none or is not there.
func interfaceSubnet(name string) string {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return ""
	}
	addrs, _ := iface.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return (&net.IPNet{IP: ipn.IP.Mask(ipn.Mask), Mask: ipn.Mask}).String()
		}
	}
	return ""
}

// Conflist is the network's CNI configuration list.
func (b Bridge) Conflist() []byte {
	type obj = map[string]any
	conf := obj{
		"cniVersion":  "1.0.0",
		"name":        b.Name,
		MasqueradeKey: b.Subnet, // staticpod's, for the network, in place of ipMasq's for each pod
		"plugins": []obj{
			{
				"type": "bridge", "bridge": b.Bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": obj{
					"type":    "host-local",
					"ranges":  [][]obj{{{"subnet": b.Subnet}}},
					"routes":  []obj{{"dst": "0.0.0.0/0"}},
					"dataDir": b.DataDir,
				},
			},
			{"type": "portmap", "capabilities": obj{"portMappings": true}},
		},
	}
	data, _ := json.MarshalIndent(conf, "", "  ")
	return append(data, '\n')
}

// HasConfig reports whether confDir holds a network configuration.
func HasConfig(confDir string) bool {
	return firstConfFile(confDir) != ""
}

// WriteDefaultConfig writes b's configuration into confDir unless the directory
// already holds a network configuration. It returns the file it wrote, "" if none.
func WriteDefaultConfig(confDir string, b Bridge) (string, error) {
	if HasConfig(confDir) {
		return "", nil
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return "", fmt.Errorf("write the default CNI configuration: %w", err)
	}
	path := filepath.Join(confDir, defaultConfFile)
	if err := atomicfile.WriteFile(path, b.Conflist(), 0o644); err != nil {
		return "", fmt.Errorf("write the default CNI configuration: %w", err)
	}
	return path, nil
}

// freeSubnet is the first of candidates that overlaps none of routes.
func freeSubnet(candidates []string, routes []*net.IPNet) (string, error) {
	for _, c := range candidates {
		_, subnet, err := net.ParseCIDR(c)
		if err != nil {
			return "", err
		}
		free := true
		for _, r := range routes {
			if r.Contains(subnet.IP) || subnet.Contains(r.IP) {
				free = false
				break
			}
		}
		if free {
			return c, nil
		}
	}
	return "", fmt.Errorf("every subnet the default pod network could take (%s) is routed on this host: write a CNI configuration instead", strings.Join(candidates, ", "))
}

// hostRoutes reads the host's IPv4 routes, but the default route and those through
// the interface skip, from a file in the format of /proc/net/route.
func hostRoutes(path, skip string) ([]*net.IPNet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the host's routes: %w", err)
	}
	defer f.Close()
	var out []*net.IPNet
	s := bufio.NewScanner(f)
	s.Scan() // the header
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 8 || fields[0] == skip {
			continue
		}
		dst, err1 := routeAddr(fields[1])
		mask, err2 := routeAddr(fields[7])
		if err1 != nil || err2 != nil {
			continue
		}
		if ones, _ := net.IPMask(mask).Size(); ones == 0 {
			continue // the default route covers everything
		}
		out = append(out, &net.IPNet{IP: net.IP(dst), Mask: net.IPMask(mask)})
	}
	return out, s.Err()
}

// routeAddr decodes an address of /proc/net/route: 8 hex digits of the address read as
// a number in the host's byte order.
func routeAddr(s string) ([]byte, error) {
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != 4 {
		return nil, fmt.Errorf("route address %q", s)
	}
	out := make([]byte, 4)
	binary.BigEndian.PutUint32(out, binary.NativeEndian.Uint32(raw))
	return out, nil
}
