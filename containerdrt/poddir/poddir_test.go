package poddir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// fakeHostFiles points the host files PreparePod reads at files in a temporary
// directory, restored when t ends.
func fakeHostFiles(t *testing.T, hosts, resolv string) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []struct {
		v       *string
		name    string
		content string
	}{{&hostHostsFile, "hosts", hosts}, {&hostResolvConf, "resolv.conf", resolv}, {&systemdResolvConf, "missing-resolved.conf", ""}} {
		old := *f.v
		*f.v = filepath.Join(dir, f.name)
		t.Cleanup(func() { *f.v = old })
		if f.content != "" {
			podtest.WriteFile(t, *f.v, f.content)
		}
	}
	oldHostname := hostnameFunc
	hostnameFunc = func() (string, error) { return "node1", nil }
	t.Cleanup(func() { hostnameFunc = oldHostname })
}

// mustPreparePod prepares a pod dir under t.TempDir(), its /etc/hosts naming podIP, and
// removes it (unmounting what it holds) when t ends.
func mustPreparePod(t *testing.T, pod *corev1.Pod, podIP string) string {
	t.Helper()
	podDir := filepath.Join(t.TempDir(), "pods", string(pod.UID))
	t.Cleanup(func() {
		if err := Remove(podDir); err != nil {
			t.Errorf("Remove: %v", err)
		}
	})
	if err := PreparePod(pod, podDir, podDir, "192.0.2.10", manifests.Objects{}); err != nil {
		t.Fatalf("PreparePod: %v", err)
	}
	if err := writeHosts(pod, podDir, podIP); err != nil { // as PrepareContainer does
		t.Fatalf("writeHosts: %v", err)
	}
	return podDir
}

var testAliases = []corev1.HostAlias{
	{IP: "10.1.2.3", Hostnames: []string{"foo.local", "bar.local"}},
	{IP: "10.1.2.4", Hostnames: []string{"baz.local"}},
}

func TestHostsFilePodNetwork(t *testing.T) {
	fakeHostFiles(t, "127.0.0.1 host-only\n", "nameserver 192.0.2.53\n")
	pod := podtest.Pod("web-node1")
	pod.Spec.Hostname = "web"
	pod.Spec.Subdomain = "backend"
	pod.Spec.HostAliases = testAliases
	podDir := mustPreparePod(t, pod, "10.0.0.5")
	want := "# Kubernetes-managed hosts file.\n" +
		"127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\n" +
		"fe00::0\tip6-mcastprefix\n" +
		"fe00::1\tip6-allnodes\n" +
		"fe00::2\tip6-allrouters\n" +
		"10.0.0.5\tweb.backend.kube-system.svc.cluster.local\tweb\n" +
		"\n# Entries added by HostAliases.\n" +
		"10.1.2.3\tfoo.local\tbar.local\n" +
		"10.1.2.4\tbaz.local\n"
	if diff := cmp.Diff(want, podtest.ReadFile(t, filepath.Join(podDir, etcHostsFile))); diff != "" {
		t.Errorf("etc-hosts (-want +got):\n%s", diff)
	}
	if got := podtest.ReadFile(t, filepath.Join(podDir, hostnameFile)); got != "web\n" {
		t.Errorf("hostname = %q, want %q", got, "web\n")
	}
}

func TestHostsFileHostNetwork(t *testing.T) {
	fakeHostFiles(t, "127.0.0.1 localhost\n192.0.2.10 node1\n", "nameserver 192.0.2.53\n")
	pod := podtest.Pod("etcd-node1")
	pod.Spec.HostNetwork = true
	pod.Spec.HostAliases = testAliases[:1]
	podDir := mustPreparePod(t, pod, "192.0.2.10")
	want := "# Kubernetes-managed hosts file (host network).\n" +
		"127.0.0.1 localhost\n192.0.2.10 node1\n" +
		"\n# Entries added by HostAliases.\n" +
		"10.1.2.3\tfoo.local\tbar.local\n"
	if diff := cmp.Diff(want, podtest.ReadFile(t, filepath.Join(podDir, etcHostsFile))); diff != "" {
		t.Errorf("etc-hosts (-want +got):\n%s", diff)
	}
	if got := podtest.ReadFile(t, filepath.Join(podDir, hostnameFile)); got != "node1\n" {
		t.Errorf("hostname = %q, want the host's %q", got, "node1\n")
	}
}

// A host without /etc/hosts (a minimal appliance image) gives a host-network pod the
// localhost entries, not a pod that cannot start.
func TestHostsFileHostNetworkWithoutHostsFile(t *testing.T) {
	fakeHostFiles(t, "", "nameserver 192.0.2.53\n") // no hosts file
	pod := podtest.Pod("etcd-node1")
	pod.Spec.HostNetwork = true
	pod.Spec.HostAliases = testAliases[:1]
	podDir := mustPreparePod(t, pod, "192.0.2.10")
	want := "# Kubernetes-managed hosts file (host network).\n" +
		"127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\n" +
		"fe00::0\tip6-mcastprefix\n" +
		"fe00::1\tip6-allnodes\n" +
		"fe00::2\tip6-allrouters\n" +
		"\n# Entries added by HostAliases.\n" +
		"10.1.2.3\tfoo.local\tbar.local\n"
	if diff := cmp.Diff(want, podtest.ReadFile(t, filepath.Join(podDir, etcHostsFile))); diff != "" {
		t.Errorf("etc-hosts (-want +got):\n%s", diff)
	}
}

// A pod's containers share one /etc/hosts: an update rewrites the file in place, so
// that containers already running, which have its inode bind-mounted, see it too.
func TestEtcFilesRewrittenInPlace(t *testing.T) {
	fakeHostFiles(t, "192.0.2.10 node1\n", "nameserver 192.0.2.53\n")
	pod := podtest.Pod("etcd-node1")
	pod.Spec.HostNetwork = true
	podDir := mustPreparePod(t, pod, "")
	path := filepath.Join(podDir, etcHostsFile)
	before := inode(t, path)
	podtest.WriteFile(t, hostHostsFile, "192.0.2.11 node1\n")
	if err := writeHosts(pod, podDir, ""); err != nil { // as the next container's PrepareContainer
		t.Fatal(err)
	}
	if got := podtest.ReadFile(t, path); !strings.Contains(got, "192.0.2.11 node1") {
		t.Errorf("etc-hosts = %q, want the host's new content", got)
	}
	if after := inode(t, path); after != before {
		t.Errorf("etc-hosts inode changed from %d to %d; running containers would keep the old file", before, after)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestPodHostnameTruncated(t *testing.T) {
	pod := podtest.Pod(strings.Repeat("a", 62) + "-bcd")
	if got, _ := Hostname(pod); got != strings.Repeat("a", 62) {
		t.Errorf("podHostnameAndDomain = %q, want 62 a's without the trailing '-'", got)
	}
}

const hostResolv = `# generated
nameserver 192.0.2.53
nameserver 192.0.2.54
search example.com. corp.example.com
options ndots:2 timeout:1
`

func TestResolvConf(t *testing.T) {
	ptr := func(s string) *string { return &s }
	tests := []struct {
		name   string
		policy corev1.DNSPolicy
		config *corev1.PodDNSConfig
		want   string
	}{{
		name:   "Default is the host's",
		policy: corev1.DNSDefault,
		want:   "search example.com corp.example.com\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions ndots:2 timeout:1\n",
	}, {
		name:   "ClusterFirst falls back to the host's",
		policy: corev1.DNSClusterFirst,
		want:   "search example.com corp.example.com\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions ndots:2 timeout:1\n",
	}, {
		name:   "None is the dnsConfig only",
		policy: corev1.DNSNone,
		config: &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.53"}, Searches: []string{"svc.local"}, Options: []corev1.PodDNSConfigOption{{Name: "edns0"}}},
		want:   "search svc.local\nnameserver 10.0.0.53\noptions edns0\n",
	}, {
		name:   "dnsConfig merges: duplicates dropped, options overridden by name, 3 nameservers",
		policy: corev1.DNSDefault,
		config: &corev1.PodDNSConfig{
			Nameservers: []string{"192.0.2.54", "10.0.0.53", "10.0.0.54"},
			Searches:    []string{"example.com", "pod.local"},
			Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("5")}, {Name: "rotate"}},
		},
		want: "search example.com corp.example.com pod.local\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nnameserver 10.0.0.53\noptions ndots:5 timeout:1 rotate\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeHostFiles(t, "127.0.0.1 localhost\n", hostResolv)
			pod := podtest.Pod("web")
			pod.Spec.DNSPolicy, pod.Spec.DNSConfig = tt.policy, tt.config
			podDir := mustPreparePod(t, pod, "127.0.0.1")
			if diff := cmp.Diff(tt.want, podtest.ReadFile(t, filepath.Join(podDir, resolvConfFile))); diff != "" {
				t.Errorf("resolv.conf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolvConfSearchLimits(t *testing.T) {
	var searches []string
	for i := range 40 {
		searches = append(searches, "d"+strconv.Itoa(i)+".example")
	}
	searches = append([]string{strings.Repeat("x", 254)}, searches...)
	got := fitSearches(searches)
	if len(got) != 31 || got[0] != "d0.example" {
		t.Errorf("fitSearches kept %d paths starting %q, want the first 32 less the one over 253 bytes", len(got), got[0])
	}
}

// A host on systemd-resolved lists only its stub, 127.0.0.53, which a pod on its own
// network cannot reach: the upstream servers in systemd's resolv.conf are used instead.
func TestResolvConfSystemdResolvedStub(t *testing.T) {
	fakeHostFiles(t, "127.0.0.1 localhost\n", "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n")
	pod := podtest.Pod("web")
	pod.Spec.DNSPolicy = corev1.DNSDefault
	podDir := mustPreparePod(t, pod, "127.0.0.1")
	if got, want := podtest.ReadFile(t, filepath.Join(podDir, resolvConfFile)), "search lan\nnameserver 127.0.0.53\noptions edns0 trust-ad\n"; got != want {
		t.Errorf("without systemd's file: resolv.conf = %q, want the host's %q", got, want)
	}
	podtest.WriteFile(t, systemdResolvConf, "nameserver 192.0.2.1\nsearch lan\n")
	if err := PreparePod(pod, podDir, podDir, "", manifests.Objects{}); err != nil {
		t.Fatal(err)
	}
	if got, want := podtest.ReadFile(t, filepath.Join(podDir, resolvConfFile)), "search lan\nnameserver 192.0.2.1\n"; got != want {
		t.Errorf("with systemd's file: resolv.conf = %q, want %q", got, want)
	}
}

func TestResolvConfWithoutHostFile(t *testing.T) {
	fakeHostFiles(t, "127.0.0.1 localhost\n", "") // no resolv.conf on the host
	pod := podtest.Pod("web")
	podDir := mustPreparePod(t, pod, "127.0.0.1")
	if got := podtest.ReadFile(t, filepath.Join(podDir, resolvConfFile)); got != "" {
		t.Errorf("resolv.conf = %q, want empty", got)
	}
}

func TestPreparePodIdempotentModes(t *testing.T) {
	fakeHostFiles(t, "127.0.0.1 localhost\n", hostResolv)
	pod := podtest.Pod("web")
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	podDir := mustPreparePod(t, pod, "127.0.0.1")
	podtest.WriteFile(t, filepath.Join(volumeDir(podDir, "scratch"), "kept"), "data")
	if err := PreparePod(pod, podDir, podDir, "", manifests.Objects{}); err != nil {
		t.Fatalf("second PreparePod: %v", err)
	}
	for path, want := range map[string]os.FileMode{
		podDir:                             os.ModeDir | podDirMode,
		filepath.Join(podDir, "etc-hosts"): etcFileMode,
		filepath.Join(podDir, "hostname"):  etcFileMode,
		volumeDir(podDir, "scratch"):       os.ModeDir | emptyDirMode,
	} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("mode of %s = %v, %v; want %v", path, fi.Mode(), err, want)
		}
	}
	if got := podtest.ReadFile(t, filepath.Join(volumeDir(podDir, "scratch"), "kept")); got != "data" {
		t.Errorf("emptyDir content after a second PreparePod = %q, want it kept", got)
	}
}

func TestDownwardAPIFiles(t *testing.T) {
	fakeHostFiles(t, "127.0.0.1 localhost\n", hostResolv)
	pod := podtest.Pod("web")
	pod.Labels = map[string]string{"tier": "front", "app": "web"}
	pod.Annotations = map[string]string{"note": `say "hi"`}
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	field := func(path string) *corev1.ObjectFieldSelector {
		return &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}
	}
	res := func(r, div string) *corev1.ResourceFieldSelector {
		return &corev1.ResourceFieldSelector{ContainerName: "app", Resource: r, Divisor: resource.MustParse(div)}
	}
	mode := int32(0o600)
	defaultMode := int32(0o640)
	pod.Spec.Volumes = []corev1.Volume{{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		DefaultMode: &defaultMode,
		Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: field("metadata.name")},
			{Path: "ns/namespace", FieldRef: field("metadata.namespace"), Mode: &mode},
			{Path: "uid", FieldRef: field("metadata.uid")},
			{Path: "labels", FieldRef: field("metadata.labels")},
			{Path: "annotations", FieldRef: field("metadata.annotations")},
			{Path: "tier", FieldRef: field("metadata.labels['tier']")},
			{Path: "mem", ResourceFieldRef: res("limits.memory", "1Mi")},
			{Path: "cpu-request", ResourceFieldRef: res("requests.cpu", "1m")},
			{Path: "cpu-limit", ResourceFieldRef: res("limits.cpu", "1")},
		},
	}}}}
	podDir := mustPreparePod(t, pod, "127.0.0.1")
	dir := volumeDir(podDir, "info")
	want := map[string]string{
		"name":         "web",
		"ns/namespace": "kube-system",
		"uid":          "uid-1234",
		"labels":       "app=\"web\"\ntier=\"front\"",
		"annotations":  `note="say \"hi\""`,
		"tier":         "front",
		"mem":          "64",
		"cpu-request":  "250",
		"cpu-limit":    strconv.Itoa(runtime.NumCPU()), // no limit: the node's CPUs
	}
	for path, content := range want {
		if got := podtest.ReadFile(t, filepath.Join(dir, path)); got != content {
			t.Errorf("%s = %q, want %q", path, got, content)
		}
		wantMode := os.FileMode(defaultMode)
		if path == "ns/namespace" {
			wantMode = os.FileMode(mode)
		}
		if fi, err := os.Stat(filepath.Join(dir, path)); err != nil || fi.Mode() != wantMode {
			t.Errorf("mode of %s = %v, %v; want %v", path, fi.Mode(), err, wantMode)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func TestDownwardAPIUnknownContainer(t *testing.T) {
	fakeHostFiles(t, "127.0.0.1 localhost\n", hostResolv)
	pod := podtest.Pod("web")
	pod.Spec.Volumes = []corev1.Volume{{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		Items: []corev1.DownwardAPIVolumeFile{{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "nope", Resource: "limits.memory"}}},
	}}}}
	dir := t.TempDir()
	err := PreparePod(pod, filepath.Join(dir, "pod"), filepath.Join(dir, "run"), "", manifests.Objects{})
	if !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("PreparePod = %v, want a %v naming container \"nope\"", err, runner.ErrCreateConfig)
	}
}

// A memory-backed emptyDir is one tmpfs per pod, mounted by the first PreparePod only,
// sized by sizeLimit, and gone after Remove.
func TestMemoryEmptyDirMountedOnce(t *testing.T) {
	requireRoot(t)
	fakeHostFiles(t, "127.0.0.1 localhost\n", hostResolv)
	pod := podtest.Pod("web")
	limit := resource.MustParse("8Mi")
	pod.Spec.Volumes = []corev1.Volume{{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &limit}}}}
	podDir := filepath.Join(t.TempDir(), "pod")
	for range 2 {
		if err := PreparePod(pod, podDir, podDir, "", manifests.Objects{}); err != nil {
			t.Fatal(err)
		}
	}
	mounts := podtest.MountsAt(t, podDir)
	if len(mounts) != 1 || mounts[0].FSType != "tmpfs" || mounts[0].Mountpoint != volumeDir(podDir, "mem") {
		t.Fatalf("mounts under the pod dir = %v, want one tmpfs at volumes/mem", podtest.DescribeMounts(mounts))
	}
	if !strings.Contains(mounts[0].VFSOptions, "size=8192k") {
		t.Errorf("tmpfs options = %q, want size=8192k", mounts[0].VFSOptions)
	}
	if err := Remove(podDir); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if m := podtest.MountsAt(t, podDir); len(m) > 0 {
		t.Errorf("mounts left after Remove: %v", podtest.DescribeMounts(m))
	}
	if _, err := os.Stat(podDir); !os.IsNotExist(err) {
		t.Errorf("pod dir after Remove: %v, want it gone", err)
	}
	if err := Remove(podDir); err != nil {
		t.Errorf("Remove of a removed pod = %v, want nil", err)
	}
}

func TestTmpfsSizeFollowsPodLimit(t *testing.T) {
	pod := podtest.Pod("web")
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
	big := resource.MustParse("1Gi")
	if got, want := tmpfsSizeOption(pod, &corev1.EmptyDirVolumeSource{SizeLimit: &big}), "size=33554432"; got != want {
		t.Errorf("tmpfsSizeOption = %q, want the pod's limit %q", got, want)
	}
}

func TestTerminationLogPath(t *testing.T) {
	if got, want := TerminationLogPath("/var/lib/staticpod/pods/u1", "app", 3), "/var/lib/staticpod/pods/u1/containers/app/3.termination-log"; got != want {
		t.Errorf("terminationLogPath = %q, want %q", got, want)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if testenv.Required() {
			t.Fatal("needs root to mount")
		}
		t.Skip("needs root to mount")
	}
}

// A container's HOSTNAME is what the pod's /etc/hostname holds: the pod's name, its
// spec.hostname or hostnameOverride, cut to 63 bytes; the node's on the host network.
func TestContainerHostname(t *testing.T) {
	fakeHostFiles(t, "127.0.0.1 localhost\n", hostResolv)
	long := strings.Repeat("a", 62) + "-b"
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
		want string
	}{
		{"pod name", func(*corev1.Pod) {}, "web"},
		{"spec.hostname", func(p *corev1.Pod) { p.Spec.Hostname = "db" }, "db"},
		{"hostnameOverride", func(p *corev1.Pod) { p.Spec.Hostname = "db"; p.Spec.HostnameOverride = new("over") }, "over"},
		{"cut to 63 bytes", func(p *corev1.Pod) { p.Name = long }, strings.Repeat("a", 62)},
		{"host network", func(p *corev1.Pod) { p.Spec.HostNetwork = true }, "node1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podtest.Pod("web")
			tc.edit(pod)
			podDir := mustPreparePod(t, pod, "127.0.0.1")
			p, err := PrepareContainer(spec.Input{Pod: pod, Container: &pod.Spec.Containers[0], PodDir: podDir, RunDir: podDir})
			if err != nil {
				t.Fatal(err)
			}
			if p.Hostname != tc.want {
				t.Errorf("hostname = %q, want %q", p.Hostname, tc.want)
			}
			if got := podtest.ReadFile(t, filepath.Join(podDir, hostnameFile)); got != tc.want+"\n" {
				t.Errorf("/etc/hostname = %q, want %q", got, tc.want+"\n")
			}
		})
	}
}

// With a run dir of its own, a pod's /etc files, termination logs and /dev/shm are
// there, and its volumes in its pod directory; Remove of each takes what it holds.
func TestRunDirHoldsWhatLastsNoLongerThanABoot(t *testing.T) {
	fakeHostFiles(t, "127.0.0.1 localhost\n", hostResolv)
	pod := podtest.Pod("web")
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	dir := t.TempDir()
	podDir, runDir := filepath.Join(dir, "pods", "web"), filepath.Join(dir, "run", "pods", "web")
	if err := PreparePod(pod, podDir, runDir, "192.0.2.10", manifests.Objects{}); err != nil {
		t.Fatal(err)
	}
	in := spec.Input{Pod: pod, Container: &pod.Spec.Containers[0], PodDir: podDir, RunDir: runDir, SandboxNS: "/proc/1/ns", PodIP: "10.0.0.5"}
	p, err := PrepareContainer(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Remove(runDir) })
	for what, got := range map[string]string{"/etc/hosts": p.EtcHosts, "/etc/hostname": p.EtcHostname, "/etc/resolv.conf": p.ResolvConf,
		"the termination log": p.TerminationLog, "/dev/shm": p.Shm} {
		if !strings.HasPrefix(got, runDir+"/") {
			t.Errorf("%s is %q, want it in the run dir %s", what, got, runDir)
		}
	}
	if len(p.Volumes) != 1 || !strings.HasPrefix(p.Volumes[0].Path, podDir+"/") {
		t.Errorf("volumes %+v, want scratch in the pod directory %s", p.Volumes, podDir)
	}
	for _, f := range []string{etcHostsFile, hostnameFile, resolvConfFile, containersDir, shmDir} {
		if _, err := os.Lstat(filepath.Join(podDir, f)); err == nil {
			t.Errorf("%s is in the pod directory too", f)
		}
	}
	if err := Remove(runDir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(runDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("run dir after Remove: %v", err)
	}
	if _, err := os.Stat(p.Volumes[0].Path); err != nil {
		t.Errorf("the volume went with the run dir: %v", err)
	}
}
