package podnet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	gocni "github.com/containerd/go-cni"
	corev1 "k8s.io/api/core/v1"
)

// Attachment is a pod network about to be set up for a pod.
type Attachment struct {
	cni    gocni.CNI
	Record Record // what tears it down: the sandbox keeps it
}

// ForPod returns the network to set up for pod's sandbox: nil and a note saying why
// when there is none (the pod is on the host's network, or no network is configured),
// an error when the configuration is broken or the network's masquerade cannot be put
// in place. A pod without hostPorts gets the network without its portmap plugin.
func (n *Network) ForPod(ctx context.Context, pod *corev1.Pod) (_ *Attachment, note string, _ error) {
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
	if cur.masq != nil {
		if err := n.ensureMasquerade(ctx, *cur.masq); err != nil {
			return nil, "", err
		}
	}
	cni, conf, ports := cur.cni, cur.conf, portMappings(pod)
	if len(ports) == 0 && cur.noPorts != nil {
		cni, conf = cur.noPorts, cur.noPortsConf // the record keeps it for the DEL
	}
	return &Attachment{cni: cni, Record: Record{
		Conf: conf, Ports: ports,
		Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID),
	}}, "", nil
}

// portMappings are the hostPorts of pod's app containers, as the kubelet hands them to
// the runtime (MakePortMappings): ports without a hostPort are left out, and a port
// named twice counts once.
func portMappings(pod *corev1.Pod) []PortMapping {
	var out []PortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			m := PortMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: strings.ToLower(string(proto)), HostIP: p.HostIP}
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// Setup runs the plugins' ADD for sandbox id on the network namespace at netns and
// returns the pod's IPs, IPv4 first.
func (a *Attachment) Setup(ctx context.Context, id, netns string) ([]string, error) {
	res, err := a.cni.Setup(ctx, id, netns, a.Record.options(id)...)
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
func (rec Record) options(id string) []gocni.NamespaceOpts {
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

// Teardown runs the plugins' DEL for sandbox id as rec says, with the configuration it
// was set up with (else the current one). netns is "" when the namespace is gone: the
// plugins then release what they can without it (addresses, port mappings).
func (n *Network) Teardown(ctx context.Context, id string, rec Record, netns string) error {
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
	return withoutPlugins(conf, func(typ string) bool {
		return !slices.ContainsFunc(binDirs, func(d string) bool { _, err := os.Stat(filepath.Join(d, typ)); return err == nil })
	})
}

// withoutPlugins is conf without the plugins whose type drop picks, and their types;
// conf itself when it drops none, or would drop them all, or is not a list.
func withoutPlugins(conf []byte, drop func(typ string) bool) ([]byte, []string) {
	var list map[string]any
	if json.Unmarshal(conf, &list) != nil {
		return conf, nil
	}
	plugins, _ := list["plugins"].([]any)
	var kept []any
	var dropped []string
	for _, p := range plugins {
		typ, _ := p.(map[string]any)["type"].(string)
		if typ != "" && drop(typ) {
			dropped = append(dropped, typ)
		} else {
			kept = append(kept, p)
		}
	}
	if len(dropped) == 0 || len(kept) == 0 {
		return conf, dropped
	}
	list["plugins"] = kept
	out, err := json.Marshal(list)
	if err != nil {
		return conf, nil
	}
	return out, dropped
}
