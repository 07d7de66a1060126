package poddir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Host files a pod's /etc files start from; variables so that tests can point them
// elsewhere.
var (
	hostHostsFile = "/etc/hosts"
	hostnameFunc  = os.Hostname
)

// writeHosts writes the pod's /etc/hosts, which names podIP, the pod's IP.
func writeHosts(pod *corev1.Pod, podDir, podIP string) error {
	hosts, err := hostsFileContent(pod, podIP)
	if err != nil {
		return err
	}
	return writeInPlace(filepath.Join(podDir, etcHostsFile), hosts, etcFileMode)
}

// writeEtcFiles writes the pod's /etc/hostname and /etc/resolv.conf.
func writeEtcFiles(pod *corev1.Pod, podDir string) error {
	hostname, err := podHostnameFile(pod)
	if err != nil {
		return err
	}
	dns, err := podDNS(pod)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name    string
		content []byte
	}{{hostnameFile, []byte(hostname + "\n")}, {resolvConfFile, dns.resolvConf()}} {
		if err := writeInPlace(filepath.Join(podDir, f.name), f.content, etcFileMode); err != nil {
			return err
		}
	}
	return nil
}

// The pod's names, as the kubelet's GeneratePodHostNameAndDomain makes them.
const (
	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
	// clusterDomain completes the FQDN of a pod with a subdomain. There is no cluster DNS
	// to serve it; it only appears in the pod's /etc/hosts, in the form a cluster using
	// kubeadm's default domain would give it.
	clusterDomain = "cluster.local"
	// maxHostnameBytes is the longest hostname the kubelet gives a pod.
	maxHostnameBytes = 63
)

// Hostname returns the pod's hostname and, with spec.subdomain, its domain.
func Hostname(pod *corev1.Pod) (hostname, domain string) {
	if o := pod.Spec.HostnameOverride; o != nil {
		return truncateHostname(*o), ""
	}
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if pod.Spec.Subdomain != "" {
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return truncateHostname(hostname), domain
}

// truncateHostname cuts a hostname to 63 bytes, then any trailing '-' or '.', as the
// kubelet's truncatePodHostnameIfNeeded does.
func truncateHostname(name string) string {
	if len(name) <= maxHostnameBytes {
		return name
	}
	return strings.TrimRight(name[:maxHostnameBytes], "-.")
}

// podHostnameFile is the content of the pod's /etc/hostname: the host's name on the
// host's network (its UTS namespace is the host's), the pod's otherwise.
func podHostnameFile(pod *corev1.Pod) (string, error) {
	if pod.Spec.HostNetwork {
		name, err := hostnameFunc()
		if err != nil {
			return "", fmt.Errorf("read hostname: %w", err)
		}
		return name, nil
	}
	name, _ := Hostname(pod)
	return name, nil
}

// localhostEntries are the first lines of a pod's own /etc/hosts, as the kubelet's
// managedHostsFileContent writes them.
const localhostEntries = "127.0.0.1\tlocalhost\n" +
	"::1\tlocalhost ip6-localhost ip6-loopback\n" +
	"fe00::0\tip6-localnet\n" +
	"fe00::0\tip6-mcastprefix\n" +
	"fe00::1\tip6-allnodes\n" +
	"fe00::2\tip6-allrouters\n"

// hostsFileContent is the pod's /etc/hosts as the kubelet writes it (kubelet_pods.go,
// managedHostsFileContent and nodeHostsFileContent): on its own network, localhost
// entries and the pod's IP with its names; on the host's network, the host's
// /etc/hosts; then the hostAliases. A host without /etc/hosts (a minimal appliance
// image) counts as one holding only the localhost entries: the kubelet would fail
// every host-network pod there.
func hostsFileContent(pod *corev1.Pod, podIP string) ([]byte, error) {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		host, err := os.ReadFile(hostHostsFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			host = []byte(localhostEntries)
		case err != nil:
			return nil, fmt.Errorf("read host's hosts file: %w", err)
		}
		b.WriteString(managedHostsHeaderHostNetwork)
		b.Write(host)
	} else {
		b.WriteString(managedHostsHeader)
		b.WriteString(localhostEntries)
		if name, domain := Hostname(pod); podIP != "" && domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", podIP, name, domain, name)
		} else if podIP != "" {
			fmt.Fprintf(&b, "%s\t%s\n", podIP, name)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes(), nil
}

// Where the host's resolver configuration is read; variables so that tests can point
// them elsewhere.
var (
	hostResolvConf = "/etc/resolv.conf"
	// With systemd-resolved, /etc/resolv.conf names only its stub, 127.0.0.53, which a
	// pod on its own network cannot reach. The kubelet has --resolv-conf for this
	// (kubeadm points it at this file); staticpod switches to it when it is needed.
	systemdResolvConf = "/run/systemd/resolve/resolv.conf"
)

// Limits of a pod's resolver configuration (k8s.io/kubernetes/pkg/apis/core/validation:
// MaxDNSNameservers, MaxDNSSearchPathsExpanded, MaxDNSSearchListCharsExpanded) and the
// stub resolver address of systemd-resolved.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxDNSSearchLen       = 253 // longer search paths abort some resolvers (glibc 2.28)
	systemdResolvedStub   = "127.0.0.53"
)

// dnsConfig is a resolver configuration: nameserver, search and options lines.
type dnsConfig struct {
	servers, searches, options []string
}

// podDNS is the pod's resolver configuration, as the kubelet's GetPodDNS forms it
// (pkg/kubelet/network/dns/dns.go): the host's for Default, and for ClusterFirst and
// ClusterFirstWithHostNet too, as on a kubelet without --cluster-dns (there is no
// cluster DNS without an apiserver); nothing for None; then dnsConfig merged in and the
// limits applied.
func podDNS(pod *corev1.Pod) (dnsConfig, error) {
	var cfg dnsConfig
	if pod.Spec.DNSPolicy != corev1.DNSNone {
		var err error
		if cfg, err = hostDNS(); err != nil {
			return dnsConfig{}, err
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.servers = dedupe(append(cfg.servers, dc.Nameservers...))
		cfg.searches = dedupe(append(cfg.searches, dc.Searches...))
		cfg.options = mergeDNSOptions(cfg.options, dc.Options)
	}
	cfg.servers = cfg.servers[:min(len(cfg.servers), maxDNSNameservers)]
	cfg.searches = fitSearches(cfg.searches)
	return cfg, nil
}

// hostDNS reads the host's resolver configuration. A host without one (an appliance
// with no network) gives an empty configuration rather than pods that cannot start.
func hostDNS() (dnsConfig, error) {
	cfg, err := readResolvConf(hostResolvConf)
	if errors.Is(err, fs.ErrNotExist) {
		return dnsConfig{}, nil
	}
	if err != nil || !slices.Equal(cfg.servers, []string{systemdResolvedStub}) {
		return cfg, err
	}
	if upstream, err := readResolvConf(systemdResolvConf); err == nil {
		return upstream, nil
	}
	return cfg, nil
}

// readResolvConf parses a resolv.conf as the kubelet's parseResolvConf does:
// nameservers accumulate, the last search and options lines win, search paths lose a
// trailing dot.
func readResolvConf(path string) (dnsConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return dnsConfig{}, fmt.Errorf("read resolver configuration: %w", err)
	}
	var cfg dnsConfig
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) > 1 {
				cfg.servers = append(cfg.servers, fields[1])
			}
		case "search":
			cfg.searches = nil
			for _, s := range fields[1:] {
				cfg.searches = append(cfg.searches, strings.TrimSuffix(s, "."))
			}
		case "options":
			cfg.options = fields[1:]
		}
	}
	return cfg, nil
}

// mergeDNSOptions overrides options by name with the pod's, keeping their order (the
// kubelet's mergeDNSOptions does the same through a map, in random order).
func mergeDNSOptions(options []string, podOptions []corev1.PodDNSConfigOption) []string {
	out := slices.Clone(options)
	for _, o := range podOptions {
		opt := o.Name
		if o.Value != nil && *o.Value != "" {
			opt += ":" + *o.Value
		}
		i := slices.IndexFunc(out, func(have string) bool {
			name, _, _ := strings.Cut(have, ":")
			return name == o.Name
		})
		if i >= 0 {
			out[i] = opt
		} else {
			out = append(out, opt)
		}
	}
	return out
}

// fitSearches applies the kubelet's formDNSSearchFitsLimits: at most 32 paths, none
// longer than 253 bytes, the whole line at most 2048 bytes.
func fitSearches(searches []string) []string {
	searches = searches[:min(len(searches), maxDNSSearchPaths)]
	searches = slices.DeleteFunc(searches, func(s string) bool { return len(s) > maxDNSSearchLen })
	for len(searches) > 0 && len(strings.Join(searches, " ")) > maxDNSSearchListChars {
		searches = searches[:len(searches)-1]
	}
	return searches
}

func dedupe(items []string) []string {
	var out []string
	for _, s := range items {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// resolvConf formats the configuration as containerd's CRI writes a sandbox's
// resolv.conf: the search line, one line per nameserver, the options line.
func (c dnsConfig) resolvConf() []byte {
	var b bytes.Buffer
	if len(c.searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(c.searches, " "))
	}
	for _, s := range c.servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(c.options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(c.options, " "))
	}
	return b.Bytes()
}
