package containerdrt

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	gocni "github.com/containerd/go-cni"
	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
)

// A pod with a network namespace of its own gets a pod network through CNI, as on a
// kubelet with containerd's CRI: the plugins of the first network configuration in
// the configuration directory are run (through github.com/containerd/go-cni) on the
// pod's pinned network namespace when its sandbox is made, and run again to tear it
// down (addresses released, veths, routes and iptables rules removed) before the
// namespace is unpinned. A sandbox records what its teardown needs (the configuration
// it was set up with, its port mappings, its pod's names) in its labels and in its pin
// directory, so that it is torn down as it was set up whatever happened meanwhile: the
// pod's manifest deleted while staticpod was down, the configuration edited, containerd's
// records lost. Without any configuration, pods have loopback only, as before.

// Defaults of the pod network.
var (
	DefaultCNIConfDir = "/etc/cni/net.d"
	// DefaultCNIBinDirs: where the CNI project installs plugins, and where Debian's
	// containernetworking-plugins does.
	DefaultCNIBinDirs = []string{"/opt/cni/bin", "/usr/lib/cni"}
)

const (
	// cniIfPrefix names the pod's interfaces: eth0 for the pod network.
	cniIfPrefix = "eth"
	// netRecordFile in a sandbox's pin directory is its netRecord, for a teardown after
	// containerd lost the sandbox's record.
	netRecordFile = "network.json"
)

// CNIConfig configures pod networks.
type CNIConfig struct {
	ConfDir string   // network configurations (.conflist, .conf, .json); the first in sorted order is the pod network; "" for none
	BinDirs []string // where the plugins are looked for
	// CacheDir is where libcni keeps the results of the plugins it ran ("" keeps its
	// default, /var/lib/cni). It is the same for every Runtime of a process.
	CacheDir string
}

// netRecord is what tearing down a sandbox's pod network needs, recorded when the
// sandbox is made: the pod's spec may be gone by the time it is torn down, and the
// configuration may have changed.
type netRecord struct {
	Conf      json.RawMessage `json:"conf,omitempty"` // the network configuration list it was set up with
	Ports     []portMapping   `json:"ports,omitempty"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	UID       string          `json:"uid"`
}

// portMapping is a hostPort as the portmap plugin takes it.
type portMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"` // tcp, udp or sctp
	HostIP        string `json:"hostIP,omitempty"`
}

// network is the pod network the configuration directory describes, read again
// whenever its files change.
type network struct {
	cfg CNIConfig
	log *slog.Logger

	mu   sync.Mutex   // guards seen and cur
	seen string       // the configuration files when cur was read: names, sizes, times
	cur  networkState // what they gave
}

// networkState is what a read of the configuration directory gave: a network, none (and
// why), or an error.
type networkState struct {
	read bool      // the directory was read
	cni  gocni.CNI // nil without a network
	conf []byte    // the network's configuration list
	name string    // its name, and the file it came from
	file string
	none string // why there is no network ("no CNI configuration in /etc/cni/net.d")
	err  error  // why the configuration could not be read
}

// cacheDirMu serializes the setting of libcni.CacheDir, a variable of the process that
// libcni reads without a lock: it is set before any plugin runs.
var cacheDirMu sync.Mutex

func newNetwork(cfg CNIConfig, log *slog.Logger) *network {
	if cfg.CacheDir != "" {
		cacheDirMu.Lock()
		if libcni.CacheDir != cfg.CacheDir {
			libcni.CacheDir = cfg.CacheDir
		}
		cacheDirMu.Unlock()
	}
	return &network{cfg: cfg, log: log}
}

// current returns the pod network as the configuration directory now describes it.
// It reads the files again only when they changed, and logs what it found when that
// changes: once at start, then at each change.
func (n *network) current() networkState {
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
func (n *network) load() networkState {
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
	return networkState{read: true, cni: c, conf: conf, name: nets[0].Config.Name, file: firstConfFile(n.cfg.ConfDir)}
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

// attachment is a pod network about to be set up for a pod.
type attachment struct {
	cni    gocni.CNI
	record netRecord
}

// forPod returns the network to set up for pod's sandbox: nil and a note saying why
// when there is none (the pod is on the host's network, or no network is configured),
// an error when the configuration is broken.
func (n *network) forPod(pod *corev1.Pod) (_ *attachment, note string, _ error) {
	if pod.Spec.HostNetwork {
		return nil, "", nil
	}
	cur := n.current()
	switch {
	case cur.err != nil:
		return nil, "", cur.err
	case cur.none != "":
		return nil, cur.none + ": the pod has loopback only", nil
	case cur.cni == nil:
		return nil, "", nil // no pod network asked for (--cni-conf-dir "")
	}
	return &attachment{cni: cur.cni, record: netRecord{
		Conf: cur.conf, Ports: portMappings(pod),
		Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID),
	}}, "", nil
}

// setup runs the plugins' ADD for sandbox id on the network namespace at netns and
// returns the pod's IPs, IPv4 first.
func (a *attachment) setup(ctx context.Context, id, netns string) ([]string, error) {
	res, err := a.cni.Setup(ctx, id, netns, a.record.options(id)...)
	if err != nil {
		return nil, err
	}
	var v4, v6 []string
	if eth := res.Interfaces[cniIfPrefix+"0"]; eth != nil {
		for _, c := range eth.IPConfigs {
			if c.IP.To4() != nil {
				v4 = append(v4, c.IP.String())
			} else {
				v6 = append(v6, c.IP.String())
			}
		}
	}
	if len(v4)+len(v6) == 0 {
		return nil, fmt.Errorf("the CNI plugins gave the pod no IP")
	}
	return append(v4, v6...), nil
}

// options are what the plugins are told beside the configuration: the port mappings,
// and the pod's names as the kubelet passes them (IgnoreUnknown, for plugins that want
// none).
func (rec netRecord) options(id string) []gocni.NamespaceOpts {
	opts := []gocni.NamespaceOpts{gocni.WithLabels(map[string]string{
		"IgnoreUnknown":              "1",
		"K8S_POD_NAMESPACE":          rec.Namespace,
		"K8S_POD_NAME":               rec.Name,
		"K8S_POD_INFRA_CONTAINER_ID": id,
		"K8S_POD_UID":                rec.UID,
	})}
	if len(rec.Ports) > 0 {
		ports := make([]gocni.PortMapping, len(rec.Ports))
		for i, p := range rec.Ports {
			ports[i] = gocni.PortMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: p.Protocol, HostIP: p.HostIP}
		}
		opts = append(opts, gocni.WithCapabilityPortMap(ports))
	}
	return opts
}

// teardown runs the plugins' DEL for sandbox id as rec says, with the configuration it
// was set up with (else the current one). netns is "" when the namespace is gone: the
// plugins then release what they can without it (addresses, port mappings).
func (n *network) teardown(ctx context.Context, id string, rec netRecord, netns string) error {
	var c gocni.CNI
	if len(rec.Conf) > 0 {
		conf, missing := installedPlugins(rec.Conf, n.cfg.BinDirs)
		if len(missing) > 0 {
			n.log.Warn("tearing down a pod network without plugins that are not installed", "id", id, "plugins", missing)
		}
		var err error
		c, err = gocni.New(gocni.WithPluginDir(n.cfg.BinDirs), gocni.WithInterfacePrefix(cniIfPrefix), gocni.WithConfListBytes(conf))
		if err != nil {
			return fmt.Errorf("tear down pod network: recorded configuration: %w", err)
		}
	} else if c = n.current().cni; c == nil {
		return fmt.Errorf("tear down pod network: no CNI configuration to do it with")
	}
	err := c.Remove(ctx, id, netns, rec.options(id)...)
	if err != nil && netns != "" && strings.Contains(err.Error(), "does not exist") {
		// Something the plugins made is gone already: an iptables chain a firewall
		// reload flushed, or one an ADD that failed never made. The bridge plugin
		// (containernetworking-plugins 1.1, with iptables-nft) then fails every DEL, and
		// the pod could never stop. Without the namespace the plugins still release the
		// address and the port mappings; the interface goes with the namespace.
		if again := c.Remove(ctx, id, "", rec.options(id)...); again == nil {
			n.log.Warn("tore down a pod network without its namespace: part of it was gone", "id", id, "err", err)
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("tear down pod network: %w", err)
	}
	return nil
}

// installedPlugins is conf without the plugins none of binDirs holds, and their types.
// A plugin that is not installed cannot undo anything (it could not have done anything
// either, when its ADD failed for that), and the DEL of a configuration list stops at
// the first plugin that fails, so it would keep the others from undoing what they did.
func installedPlugins(conf []byte, binDirs []string) ([]byte, []string) {
	var list map[string]any
	if json.Unmarshal(conf, &list) != nil {
		return conf, nil
	}
	plugins, _ := list["plugins"].([]any)
	var kept []any
	var missing []string
	for _, p := range plugins {
		typ, _ := p.(map[string]any)["type"].(string)
		if typ == "" || slices.ContainsFunc(binDirs, func(d string) bool { _, err := os.Stat(filepath.Join(d, typ)); return err == nil }) {
			kept = append(kept, p)
		} else {
			missing = append(missing, typ)
		}
	}
	if len(missing) == 0 || len(kept) == 0 {
		return conf, missing
	}
	list["plugins"] = kept
	out, err := json.Marshal(list)
	if err != nil {
		return conf, nil
	}
	return out, missing
}

// portMappings are the hostPorts of pod's app containers, as the kubelet hands them to
// the runtime (MakePortMappings): ports without a hostPort are left out, and a port
// named twice counts once.
func portMappings(pod *corev1.Pod) []portMapping {
	var out []portMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			m := portMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: strings.ToLower(string(proto)), HostIP: p.HostIP}
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// recordLabel is rec as a label value, without the configuration if the whole would
// not fit in a label (the pin directory's copy has it).
func recordLabel(rec netRecord) string {
	data, _ := json.Marshal(rec)
	if len(labelNetwork)+len(data) > maxLabelSize {
		rec.Conf = nil
		data, _ = json.Marshal(rec)
	}
	return string(data)
}

// netRecordOf is the network record of sandbox id, from its labels or, failing them
// (no label; one without the configuration), its pin directory; ok is false when the
// sandbox has no pod network to tear down.
func (r *Runtime) netRecordOf(id string, labels map[string]string) (rec netRecord, ok bool) {
	if v := labels[labelNetwork]; v != "" && json.Unmarshal([]byte(v), &rec) == nil && len(rec.Conf) > 0 {
		return rec, true
	}
	var fromFile netRecord
	if data, err := os.ReadFile(filepath.Join(r.pinDir(id), netRecordFile)); err == nil && json.Unmarshal(data, &fromFile) == nil {
		return fromFile, true
	}
	return rec, labels[labelNetwork] != ""
}
