package podnet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"time"
)

// The default network masquerades what its pods send out of the host, as the bridge
// plugin's ipMasq does, but once for the network rather than once for each pod. The
// plugin makes a chain of its own for every pod and removes it at the pod's DEL: about
// six runs of iptables and 18 ms of CPU a pod at the ADD alone, which a burst of pods
// pays 20 or 100 times over on two cores (with iptables' legacy backend each run also
// waits for the xtables lock). The configuration list says which subnet
// staticpod masquerades (MasqueradeKey), and staticpod keeps, in the nat table:
//
//	POSTROUTING: -s SUBNET -m comment --comment "staticpod: masquerade of network NAME" -j STATICPOD-MASQ-<hash of NAME>
//	STATICPOD-MASQ-<hash>: -d SUBNET -j RETURN; -d 224.0.0.0/4 -j RETURN; -j MASQUERADE
//
// which leaves alone, as the plugin's chain does, what stays in the subnet and
// multicast. The rules belong to the network, as its bridge does: they stay when its
// pods go.

// MasqueradeKey is the key of a configuration list whose value is the IPv4 subnet whose
// traffic staticpod masquerades for the network. CNI leaves keys it does not know alone.
const MasqueradeKey = "io.staticpod.masquerade"

// masqueradeChainPrefix begins the names of the masquerade chains.
const masqueradeChainPrefix = "STATICPOD-MASQ-"

// masqueradeRecheck is how long a check that the rules are in place is trusted: a pod
// set up later checks again, so that rules a reload of the host's firewall took come
// back.
const masqueradeRecheck = time.Minute

// masquerade is a network's masquerade: its name and its subnet.
type masquerade struct {
	network string
	subnet  string
}

// masqueradeOf is the masquerade a configuration list asks for, nil if it asks for none.
func masqueradeOf(conf []byte) (*masquerade, error) {
	var list map[string]any
	if err := json.Unmarshal(conf, &list); err != nil {
		return nil, nil // libcni has said what is wrong with the list
	}
	value, asked := list[MasqueradeKey]
	if !asked {
		return nil, nil
	}
	subnet, _ := value.(string)
	ip, ipn, err := net.ParseCIDR(subnet)
	if err != nil || ip.To4() == nil || !ip.Equal(ipn.IP) {
		return nil, fmt.Errorf("%s: %s is not an IPv4 subnet", MasqueradeKey, jsonOf(value))
	}
	name, _ := list["name"].(string)
	return &masquerade{network: name, subnet: ipn.String()}, nil
}

// jsonOf is v as JSON spells it.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// chain is the network's masquerade chain.
func (m masquerade) chain() string {
	sum := sha256.Sum256([]byte(m.network))
	return masqueradeChainPrefix + strings.ToUpper(hex.EncodeToString(sum[:4]))
}

// jump is the POSTROUTING rule that sends the network's traffic to its chain, as
// iptables takes it after the chain's name.
func (m masquerade) jump() []string {
	return []string{"-s", m.subnet, "-m", "comment", "--comment", fmt.Sprintf("staticpod: masquerade of network %q", m.network), "-j", m.chain()}
}

// ensure puts the rules in place: the chain anew (a restore of it replaces what it
// held), and the jump to it unless it is there.
func (m masquerade) ensure(ctx context.Context) error {
	rules := fmt.Sprintf("*nat\n:%[1]s - [0:0]\n-A %[1]s -d %[2]s -j RETURN\n-A %[1]s -d 224.0.0.0/4 -j RETURN\n-A %[1]s -j MASQUERADE\nCOMMIT\n", m.chain(), m.subnet)
	restore := exec.CommandContext(ctx, "iptables-restore", "-w", "--noflush")
	restore.Stdin = strings.NewReader(rules)
	if out, err := restore.CombinedOutput(); err != nil {
		return fmt.Errorf("masquerade of pod network %s: iptables-restore: %v: %s", m.network, err, bytes.TrimSpace(out))
	}
	var exit *exec.ExitError
	switch err := iptables(ctx, append([]string{"-C", "POSTROUTING"}, m.jump()...)...); {
	case err == nil:
		return nil
	case !errors.As(err, &exit) || exit.ExitCode() != 1: // 1: no such rule
		return fmt.Errorf("masquerade of pod network %s: %w", m.network, err)
	}
	if err := iptables(ctx, append([]string{"-A", "POSTROUTING"}, m.jump()...)...); err != nil {
		return fmt.Errorf("masquerade of pod network %s: %w", m.network, err)
	}
	return nil
}

// iptables runs iptables on the nat table (waiting for the xtables lock, with the
// legacy backend).
func iptables(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "iptables", append([]string{"-w", "-t", "nat"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args[:2], " "), err, bytes.TrimSpace(out))
	}
	return nil
}
