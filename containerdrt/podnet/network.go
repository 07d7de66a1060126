package podnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	gocni "github.com/containerd/go-cni"
	"github.com/containernetworking/cni/libcni"
)

// Defaults of the pod network.
var (
	DefaultConfDir = "/etc/cni/net.d"
	// DefaultBinDirs: where the CNI project installs plugins, and where Debian's
	// containernetworking-plugins does.
	DefaultBinDirs = []string{"/opt/cni/bin", "/usr/lib/cni"}
)

// cniIfPrefix names the pod's interfaces: eth0 for the pod network.
const cniIfPrefix = "eth"

// Config configures pod networks.
type Config struct {
	ConfDir string   // network configurations (.conflist, .conf, .json); the first in sorted order is the pod network; "" for none
	BinDirs []string // where the plugins are looked for
	// CacheDir is where libcni keeps the results of the plugins it ran ("" keeps its
	// default, /var/lib/cni). It is the same for every Runtime of a process.
	CacheDir string
}

// Network is the pod network the configuration directory describes, read again
// whenever its files change.
type Network struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex   // guards seen and cur
	seen string       // the configuration files when cur was read: names, sizes, times
	cur  networkState // what they gave

	masqMu sync.Mutex // held while the masquerade rules are checked; guards masqOK and masqAt
	masqOK masquerade // the masquerade last found in place, at masqAt
	masqAt time.Time
}

// networkState is what a read of the configuration directory gave: a network, none (and
// why), or an error.
type networkState struct {
	read bool      // the directory was read
	cni  gocni.CNI // nil without a network
	conf []byte    // the network's configuration list
	name string    // its name, and the file it came from
	file string
	none string      // why there is no network ("no CNI configuration in /etc/cni/net.d")
	err  error       // why the configuration could not be read
	masq *masquerade // the masquerade staticpod keeps for the network (MasqueradeKey), if any

	// noPorts is the network without its portmap plugin, for a pod without hostPorts,
	// whose ADD and DEL would do nothing but cost an execution each; nil when the
	// network has none. noPortsConf is its configuration list.
	noPorts     gocni.CNI
	noPortsConf []byte
}

// cacheDirMu serializes the setting of libcni.CacheDir, a variable of the process that
// libcni reads without a lock: it is set before any plugin runs.
var cacheDirMu sync.Mutex

// New is the pod network cfg describes; the configuration is read when first needed.
func New(cfg Config, log *slog.Logger) *Network {
	if cfg.CacheDir != "" {
		cacheDirMu.Lock()
		if libcni.CacheDir != cfg.CacheDir {
			libcni.CacheDir = cfg.CacheDir
		}
		cacheDirMu.Unlock()
	}
	return &Network{cfg: cfg, log: log}
}

// BinDirs are the directories the plugins are run from.
func (n *Network) BinDirs() []string { return n.cfg.BinDirs }

// Read reads the configuration directory now rather than when a sandbox first needs
// it, so that the log says at start how pods will be networked, and puts the network's
// masquerade in place before its first pod.
func (n *Network) Read() {
	if cur := n.current(); cur.masq != nil {
		// iptables -w waits for the xtables lock without end: a holder that never lets
		// go must not hold up the start. A pod's setup tries again.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.ensureMasquerade(ctx, *cur.masq); err != nil {
			n.log.Error("pods on the pod network cannot start until the masquerade of what they send out is in place", "network", cur.name, "err", err)
		}
	}
}

// ensureMasquerade puts the masquerade rules of m in place unless a check found them
// there less than masqueradeRecheck ago.
func (n *Network) ensureMasquerade(ctx context.Context, m masquerade) error {
	n.masqMu.Lock()
	defer n.masqMu.Unlock()
	if n.masqOK == m && time.Since(n.masqAt) < masqueradeRecheck {
		return nil
	}
	if err := m.ensure(ctx); err != nil {
		return err
	}
	n.masqOK, n.masqAt = m, time.Now()
	return nil
}

// current returns the pod network as the configuration directory now describes it.
// It reads the files again only when they changed, and logs what it found when that
// changes: once at start, then at each change.
func (n *Network) current() networkState {
	seen := confFilesSeen(n.cfg.ConfDir)
	n.mu.Lock()
	defer n.mu.Unlock()
	if seen == n.seen && n.cur.read {
		return n.cur
	}
	old := n.cur
	n.seen, n.cur = seen, n.load()
	switch cur := n.cur; {
	case cur.err != nil && (old.err == nil || old.err.Error() != cur.err.Error()):
		n.log.Error("the pod network's configuration is broken: pods not on the host network cannot start until it is fixed", "dir", n.cfg.ConfDir, "err", cur.err)
	case cur.cni != nil && (old.cni == nil || string(old.conf) != string(cur.conf)):
		n.log.Info("pod network", "network", cur.name, "file", cur.file, "plugins", pluginTypes(cur.conf))
	case cur.none != "" && old.none == "":
		n.log.Info(cur.none + ": pods not on the host network have loopback only")
	}
	return n.cur
}

// load reads the configuration directory.
func (n *Network) load() networkState {
	switch {
	case n.cfg.ConfDir == "":
		return networkState{read: true} // none asked for: nothing to say
	case firstConfFile(n.cfg.ConfDir) == "":
		return networkState{read: true, none: "no CNI configuration in " + n.cfg.ConfDir}
	}
	c, err := gocni.New(gocni.WithPluginDir(n.cfg.BinDirs), gocni.WithPluginConfDir(n.cfg.ConfDir), gocni.WithInterfacePrefix(cniIfPrefix))
	if err == nil {
		err = c.Load(gocni.WithDefaultConf)
	}
	if err != nil {
		return networkState{read: true, err: fmt.Errorf("CNI configuration in %s: %w", n.cfg.ConfDir, err)}
	}
	nets := c.GetConfig().Networks
	if len(nets) == 0 {
		return networkState{read: true, err: fmt.Errorf("CNI configuration in %s: no network", n.cfg.ConfDir)}
	}
	conf := []byte(nets[0].Config.Source)
	masq, err := masqueradeOf(conf)
	if err != nil {
		return networkState{read: true, err: fmt.Errorf("CNI configuration %s: %w", firstConfFile(n.cfg.ConfDir), err)}
	}
	st := networkState{read: true, cni: c, conf: conf, name: nets[0].Config.Name, file: firstConfFile(n.cfg.ConfDir), masq: masq}
	if np, dropped := withoutPlugins(conf, func(typ string) bool { return typ == "portmap" }); len(dropped) > 0 && !bytes.Equal(np, conf) {
		if c, err := gocni.New(gocni.WithPluginDir(n.cfg.BinDirs), gocni.WithInterfacePrefix(cniIfPrefix), gocni.WithConfListBytes(np)); err == nil {
			st.noPorts, st.noPortsConf = c, np
		}
	}
	return st
}

// confFileExts are the files libcni reads as network configurations.
var confFileExts = []string{".conf", ".conflist", ".json"}

// confFilesSeen describes the configuration files of dir (names, sizes, modification
// times), so that a change to them is noticed without reading them.
func confFilesSeen(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, e := range entries {
		if !slices.Contains(confFileExts, filepath.Ext(e.Name())) {
			continue
		}
		info, err := os.Stat(filepath.Join(dir, e.Name())) // a link's target
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s %d %d\n", e.Name(), info.Size(), info.ModTime().UnixNano())
	}
	return b.String()
}

// firstConfFile is the file go-cni takes the network from: the first in sorted order.
func firstConfFile(dir string) string {
	files, err := libcni.ConfFiles(dir, confFileExts)
	if err != nil || len(files) == 0 {
		return ""
	}
	slices.Sort(files)
	return files[0]
}

// pluginTypes lists the plugins of a configuration list, for the log.
func pluginTypes(conf []byte) []string {
	var list struct {
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	json.Unmarshal(conf, &list)
	var out []string
	for _, p := range list.Plugins {
		out = append(out, p.Type)
	}
	return out
}
