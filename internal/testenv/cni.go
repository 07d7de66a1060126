package testenv

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// CNIPlugins are the plugins a test network uses; Debian's containernetworking-plugins
// installs them in /usr/lib/cni, the CNI project's releases in /opt/cni/bin.
var CNIPlugins = []string{"bridge", "host-local", "portmap"}

// CNIBinDirs are where the plugins are looked for.
var CNIBinDirs = []string{"/opt/cni/bin", "/usr/lib/cni"}

// CNINetwork is a pod network of one test: a configuration directory of its own, a
// bridge, subnet and network name nobody else uses, host-local's allocations and
// libcni's cache under the test's directory. What the plugins leave on the host's
// network (veths on its bridge, iptables rules naming it, the bridge) is removed when
// the test ends, and Leaks lists what is there before that.
type CNINetwork struct {
	Name     string // the network's name, unique to the test
	Bridge   string // the bridge device
	Subnet   string // a /24 no route of the host covers
	Gateway  string // the bridge's address in it, the pods' way to the host
	ConfDir  string
	BinDirs  []string
	DataDir  string // host-local's allocations: <DataDir>/<Name>/<ip>
	CacheDir string // libcni's cache
}

// CNI makes a test network. conflist writes its configuration list; it is stored in
// the network's ConfDir (nothing is written when conflist is nil). The test skips when
// the plugins or iptables are missing, unless Required, when it fails.
func CNI(t testing.TB, conflist func(CNINetwork) []byte) *CNINetwork {
	t.Helper()
	if testing.Short() {
		t.Skip("needs CNI plugins: skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		skipOrFatal(t, fmt.Errorf("%w: CNI needs root", ErrUnavailable))
	}
	for _, p := range CNIPlugins {
		if _, err := FindCNIPlugin(p); err != nil {
			skipOrFatal(t, err)
		}
	}
	for _, tool := range []string{"iptables-save", "iptables-restore", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFatal(t, fmt.Errorf("%w: %s is needed to clean up after CNI tests: %v", ErrUnavailable, tool, err))
		}
	}
	dir := t.TempDir()
	id := randomHex(3)
	n := &CNINetwork{
		Name: "sptest-" + id, Bridge: "sptest" + id,
		ConfDir: filepath.Join(dir, "net.d"), BinDirs: CNIBinDirs,
		DataDir: filepath.Join(dir, "ipam"), CacheDir: filepath.Join(dir, "cache"),
	}
	subnet, err := freeTestSubnet()
	if err != nil {
		t.Fatal(err)
	}
	n.Subnet = subnet.String()
	gw := slices.Clone(subnet.IP.To4())
	gw[3] = 1
	n.Gateway = gw.String()
	release, err := acquireHostNetwork()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.remove(); err != nil {
			t.Errorf("remove test network %s: %v", n.Name, err)
		}
		if err := release(); err != nil {
			t.Errorf("restore the host's network settings: %v", err)
		}
	})
	if conflist != nil {
		if err := os.MkdirAll(n.ConfDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.ConfDir, "10-"+n.Name+".conflist"), conflist(*n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// FindCNIPlugin returns the path of a CNI plugin in CNIBinDirs.
func FindCNIPlugin(name string) (string, error) {
	for _, d := range CNIBinDirs {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: CNI plugin %s is not in %v (apt-get install containernetworking-plugins)", ErrUnavailable, name, CNIBinDirs)
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// Leaks lists what the network still holds on the host: veths on its bridge, IP
// allocations, iptables rules that name it or its subnet, cached plugin results. A
// network whose pods are all gone holds none of them.
func (n *CNINetwork) Leaks() []string {
	var out []string
	ifs, _ := os.ReadDir(filepath.Join("/sys/class/net", n.Bridge, "brif"))
	for _, e := range ifs {
		out = append(out, "veth "+e.Name()+" on bridge "+n.Bridge)
	}
	ips, _ := os.ReadDir(filepath.Join(n.DataDir, n.Name))
	for _, e := range ips {
		if net.ParseIP(e.Name()) != nil {
			out = append(out, "IP allocation "+e.Name())
		}
	}
	for _, r := range n.rules() {
		if !r.masquerade() { // the network's own, as its bridge is
			out = append(out, "iptables: "+r.String())
		}
	}
	cached, _ := filepath.Glob(filepath.Join(n.CacheDir, "results", n.Name+"-*"))
	for _, c := range cached {
		out = append(out, "cached result "+filepath.Base(c))
	}
	return out
}

// Masquerade lists the rules of the masquerade staticpod keeps for the network
// (podnet.MasqueradeKey): the jump to its chain and the chain's rules.
func (n *CNINetwork) Masquerade() []string {
	var out []string
	for _, r := range n.masquerade() {
		out = append(out, r.String())
	}
	return out
}

// RemoveMasquerade deletes the network's masquerade, and nothing else of it.
func (n *CNINetwork) RemoveMasquerade() error {
	return deleteRules("iptables", n.masquerade())
}

func (n *CNINetwork) masquerade() []rule {
	var out []rule
	for _, r := range n.rules() {
		if r.masquerade() {
			out = append(out, r)
		}
	}
	return out
}

// FlushRules deletes the network's iptables rules and chains behind the plugins'
// back, as a reload of the host's firewall does.
func (n *CNINetwork) FlushRules() error {
	var errs []error
	for _, t := range []string{"iptables", "ip6tables"} {
		errs = append(errs, deleteRules(t, n.rules()))
	}
	return errors.Join(errs...)
}

// remove deletes what the plugins left on the host for the network: its iptables
// rules and the chains they jump to, the veths on its bridge, the bridge.
func (n *CNINetwork) remove() error {
	var errs []error
	for _, t := range []string{"iptables", "ip6tables"} {
		errs = append(errs, deleteRules(t, n.rules()))
	}
	ifs, _ := os.ReadDir(filepath.Join("/sys/class/net", n.Bridge, "brif"))
	for _, e := range ifs {
		run("ip", "link", "del", e.Name()) // it may go with its namespace meanwhile
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.Bridge)); err == nil {
		errs = append(errs, run("ip", "link", "del", n.Bridge))
	}
	return errors.Join(errs...)
}

// rule is one line of iptables-save.
type rule struct {
	tool, table, chain string
	spec               string // what follows "-A <chain> "
}

func (r rule) String() string {
	return fmt.Sprintf("%s -t %s -A %s %s", r.tool, r.table, r.chain, r.spec)
}

// target is the chain the rule jumps to, if any.
func (r rule) target() string {
	f := strings.Fields(r.spec)
	if i := slices.Index(f, "-j"); i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	return ""
}

// masqueradeChainPrefix begins the name of the chain of the masquerade staticpod keeps
// for a network (podnet.MasqueradeKey): it is the network's, not a pod's.
const masqueradeChainPrefix = "STATICPOD-MASQ-"

// masquerade reports whether the rule is of a network's masquerade: in its chain, or
// the jump to it.
func (r rule) masquerade() bool {
	return strings.HasPrefix(r.chain, masqueradeChainPrefix) || strings.HasPrefix(r.target(), masqueradeChainPrefix)
}

// removable reports whether chain is one the network's rules made: a plugin's for one
// pod (but portmap's own, which every pod shares) or a network's masquerade.
func removable(chain string) bool {
	return strings.HasPrefix(chain, "CNI-") && !strings.HasPrefix(chain, "CNI-HOSTPORT-") || strings.HasPrefix(chain, masqueradeChainPrefix)
}

// rules are the iptables rules that name the network (the plugins' comments carry its
// name) or its subnet, and the rules of the chains those jump to.
func (n *CNINetwork) rules() []rule {
	var out []rule
	for _, tool := range []string{"iptables", "ip6tables"} {
		all := saveRules(tool)
		ours := map[string]bool{} // chains the network's rules jump to
		for _, r := range all {
			if strings.Contains(r.spec, `\"`+n.Name+`\"`) || strings.Contains(r.spec, n.Subnet) {
				out = append(out, r)
				if t := r.target(); removable(t) {
					ours[r.table+"/"+t] = true
				}
			}
		}
		for _, r := range all {
			if ours[r.table+"/"+r.chain] && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// saveRules reads every rule of every table with tool-save.
func saveRules(tool string) []rule {
	data, err := exec.Command(tool + "-save").Output()
	if err != nil {
		return nil
	}
	var out []rule
	table := ""
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, "-A "):
			chain, spec, _ := strings.Cut(line[3:], " ")
			out = append(out, rule{tool: tool, table: table, chain: chain, spec: spec})
		}
	}
	return out
}

// deleteRules deletes rules, those of tool, with tool-restore, then the chains they
// emptied that the network's rules made (removable).
func deleteRules(tool string, rules []rule) error {
	byTable := map[string][]string{}
	chains := map[string][]string{}
	for _, r := range rules {
		if r.tool != tool {
			continue
		}
		byTable[r.table] = append(byTable[r.table], "-D "+r.chain+" "+r.spec)
		if removable(r.chain) && !slices.Contains(chains[r.table], r.chain) {
			chains[r.table] = append(chains[r.table], r.chain)
		}
	}
	if len(byTable) == 0 {
		return nil
	}
	var in bytes.Buffer
	for table, lines := range byTable {
		fmt.Fprintf(&in, "*%s\n%s\n", table, strings.Join(lines, "\n"))
		for _, c := range chains[table] {
			fmt.Fprintf(&in, "-X %s\n", c)
		}
		in.WriteString("COMMIT\n")
	}
	cmd := exec.Command(tool+"-restore", "--noflush")
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %v: %s\n%s", tool, err, out, in.String())
	}
	return nil
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// freeTestSubnet picks a random 10.2xx.x.0/24 that no route of the host covers.
func freeTestSubnet() (*net.IPNet, error) {
	routes := ipv4Routes()
	for range 100 {
		b := make([]byte, 2)
		rand.Read(b)
		_, subnet, _ := net.ParseCIDR(fmt.Sprintf("10.%d.%d.0/24", 200+int(b[0])%50, b[1]))
		if !slices.ContainsFunc(routes, func(r *net.IPNet) bool { return r.Contains(subnet.IP) || subnet.Contains(r.IP) }) {
			return subnet, nil
		}
	}
	return nil, errors.New("no free 10.2xx.x.0/24 for a test network")
}

// ipv4Routes are the host's IPv4 routes but the default one, from /proc/net/route.
func ipv4Routes() []*net.IPNet {
	data, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil
	}
	var out []*net.IPNet
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 8 {
			continue
		}
		dst, err1 := hex.DecodeString(f[1])
		mask, err2 := hex.DecodeString(f[7])
		if err1 != nil || err2 != nil || len(dst) != 4 || len(mask) != 4 {
			continue
		}
		ip := binary.BigEndian.AppendUint32(nil, binary.NativeEndian.Uint32(dst))
		m := net.IPMask(binary.BigEndian.AppendUint32(nil, binary.NativeEndian.Uint32(mask)))
		if ones, _ := m.Size(); ones > 0 {
			out = append(out, &net.IPNet{IP: ip, Mask: m})
		}
	}
	return out
}

// IPForwarding is the host's net.ipv4.ip_forward, for tests that show what they
// changed.
func IPForwarding() int {
	data, _ := os.ReadFile(ipForward)
	v, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return v
}
