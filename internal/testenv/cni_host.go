package testenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
)

// The bridge plugin turns IP forwarding on, and portmap adds chains of its own to the
// nat table, for every network on the host. The test processes that use CNI networks
// (test packages run at once) register in hostNetworkState; the last one to leave puts
// IP forwarding back as the first found it and removes portmap's chains if they are
// empty. The state is guarded by an flock on hostNetworkLock.
const (
	hostNetworkLock  = "/run/staticpod-test-cni.lock"
	hostNetworkState = "/run/staticpod-test-cni.json"
	ipForward        = "/proc/sys/net/ipv4/ip_forward"
)

type hostNetwork struct {
	Users     []int  `json:"users"` // PIDs of the test processes using CNI networks, once per network
	IPForward string `json:"ipForward"`
	// NftTables are the nftables tables there were before (iptables-nft makes its nat
	// tables on first use).
	NftTables []string `json:"nftTables"`
}

// acquireHostNetwork registers a test network; release undoes the host-wide settings
// once no test network is left.
func acquireHostNetwork() (release func() error, err error) {
	err = withHostNetwork(func(h *hostNetwork) {
		h.Users = slices.DeleteFunc(h.Users, func(pid int) bool { return syscall.Kill(pid, 0) != nil })
		if len(h.Users) == 0 {
			data, _ := os.ReadFile(ipForward)
			h.IPForward = strings.TrimSpace(string(data))
			h.NftTables = nftTables()
		}
		h.Users = append(h.Users, os.Getpid())
	})
	if err != nil {
		return nil, err
	}
	return func() error {
		var errs []error
		err := withHostNetwork(func(h *hostNetwork) {
			if i := slices.Index(h.Users, os.Getpid()); i >= 0 {
				h.Users = slices.Delete(h.Users, i, i+1)
			}
			h.Users = slices.DeleteFunc(h.Users, func(pid int) bool { return syscall.Kill(pid, 0) != nil })
			if len(h.Users) > 0 {
				return
			}
			if h.IPForward != "" {
				errs = append(errs, os.WriteFile(ipForward, []byte(h.IPForward), 0o644))
			}
			errs = append(errs, removePortmapChains(), removeNewNatTables(h.NftTables))
		})
		return errors.Join(append(errs, err)...)
	}, nil
}

func withHostNetwork(fn func(*hostNetwork)) error {
	lock, err := os.OpenFile(hostNetworkLock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	var h hostNetwork
	if data, err := os.ReadFile(hostNetworkState); err == nil {
		json.Unmarshal(data, &h)
	}
	fn(&h)
	if len(h.Users) == 0 { // the lock file stays: a process may be waiting on it
		return ignoreNotExist(os.Remove(hostNetworkState))
	}
	data, _ := json.Marshal(h)
	return os.WriteFile(hostNetworkState, data, 0o600)
}

func ignoreNotExist(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// portmapChains are the chains the portmap plugin makes once for every network, with
// the rules that lead to them from the built-in chains.
var portmapChains = []string{"CNI-HOSTPORT-DNAT", "CNI-HOSTPORT-SETMARK", "CNI-HOSTPORT-MASQ"}

// removePortmapChains removes portmap's chains and the jumps to them when no port is
// mapped through them any more (its DNAT chain is empty), as they were before any test.
func removePortmapChains() error {
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		all := saveRules(tool)
		if slices.ContainsFunc(all, func(r rule) bool { return r.table == "nat" && r.chain == "CNI-HOSTPORT-DNAT" }) {
			continue // ports are mapped: somebody's pods use them
		}
		var del []rule
		for _, r := range all {
			if r.table == "nat" && (slices.Contains(portmapChains, r.target()) || slices.Contains(portmapChains, r.chain)) {
				del = append(del, r)
			}
		}
		errs = append(errs, deleteRules(tool, del))
		var in bytes.Buffer
		in.WriteString("*nat\n")
		exists := chainsOf(tool, "nat")
		for _, c := range portmapChains {
			if exists[c] {
				fmt.Fprintf(&in, "-X %s\n", c)
			}
		}
		in.WriteString("COMMIT\n")
		cmd := exec.Command(tool+"-restore", "--noflush")
		cmd.Stdin = &in
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s-restore: %v: %s", tool, err, out))
		}
	}
	return errors.Join(errs...)
}

// nftTables lists the nftables tables ("ip nat"), none where nft is not installed.
func nftTables() []string {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	var tables []string
	for _, line := range strings.Split(string(out), "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables = append(tables, t)
		}
	}
	return tables
}

// removeNewNatTables deletes the nat tables iptables-nft made for the tests (those not
// in before) once they hold no rule and no chain of their own.
func removeNewNatTables(before []string) error {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	var errs []error
	for _, tt := range []struct{ family, tool string }{{"ip", "iptables"}, {"ip6", "ip6tables"}} {
		table := tt.family + " nat"
		if slices.Contains(before, table) || !slices.Contains(nftTables(), table) {
			continue
		}
		chains := chainsOf(tt.tool, "nat")
		empty := !slices.ContainsFunc(saveRules(tt.tool), func(r rule) bool { return r.table == "nat" })
		for c := range chains {
			empty = empty && slices.Contains([]string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}, c)
		}
		if empty {
			errs = append(errs, run("nft", "delete", "table", tt.family, "nat"))
		}
	}
	return errors.Join(errs...)
}

// chainsOf are the chains of a table, by iptables-save's ":<chain>" lines.
func chainsOf(tool, table string) map[string]bool {
	data, err := exec.Command(tool+"-save", "-t", table).Output()
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, ":"); ok {
			out[strings.Fields(name)[0]] = true
		}
	}
	return out
}
