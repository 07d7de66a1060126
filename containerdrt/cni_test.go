package containerdrt

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/containerdrt/podnet"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// testBridge is the default network's configuration for a test network: what
// --cni-default-bridge writes, on the test's own bridge, subnet and directories.
func testBridge(n testenv.CNINetwork) []byte {
	return podnet.Bridge{Name: n.Name, Bridge: n.Bridge, Subnet: n.Subnet, DataDir: n.DataDir}.Conflist()
}

// withCNI configures a test runtime with the test network n.
func withCNI(n *testenv.CNINetwork) func(*Config) {
	return func(cfg *Config) {
		cfg.CNI = podnet.Config{ConfDir: n.ConfDir, BinDirs: n.BinDirs, CacheDir: n.CacheDir}
	}
}

// assertNoLeaks fails t if the network still holds anything on the host.
func assertNoLeaks(t *testing.T, n *testenv.CNINetwork) {
	t.Helper()
	if leaks := n.Leaks(); len(leaks) > 0 {
		t.Errorf("left on the host's network:\n  %s", strings.Join(leaks, "\n  "))
	}
}

// execOut runs a command in a container and returns its output; it fails t if the
// command fails.
func (r *testRuntime) execOut(t *testing.T, id string, cmd ...string) string {
	t.Helper()
	var out strings.Builder
	code, err := r.Exec(r.ctx, id, runner.ExecRequest{Command: cmd, Stdout: &out, Stderr: &out})
	if err != nil || code != 0 {
		t.Fatalf("exec %v in %s: exit %d, %v: %s", cmd, id, code, err, out.String())
	}
	return out.String()
}

// Pods get an address each on the pod network, which their containers see on eth0,
// in /etc/hosts and through the downward API, and reach each other by it. Removing
// them leaves no veth, no address allocation and no iptables rule behind.
func TestPodNetwork(t *testing.T) {
	n := testenv.CNI(t, testBridge)
	r := newTestRuntime(t, withCNI(n))
	server := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: server}
spec:
  containers:
  - name: httpd
    image: `+testImage+`
    command: ["sh", "-c", "mkdir -p /www && echo hello from $(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www"]
`)
	client := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  containers:
  - name: c
    image: `+testImage+`
    command: [sleep, "3600"]
    env:
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
`)
	srv := r.mustRunPod(t, server)
	cli := r.mustRunPod(t, client)
	srvIP, cliIP := r.podIPOf(t, server.UID), r.podIPOf(t, client.UID)
	_, subnet, _ := net.ParseCIDR(n.Subnet)
	for _, ip := range []string{srvIP, cliIP} {
		if !subnet.Contains(net.ParseIP(ip)) {
			t.Errorf("pod IP %s is not in the network's subnet %s", ip, n.Subnet)
		}
	}
	if srvIP == cliIP {
		t.Fatalf("both pods have IP %s", srvIP)
	}
	r.awaitState(t, srv["httpd"].ID, runner.StateRunning)
	r.awaitState(t, cli["c"].ID, runner.StateRunning)

	if got := r.execOut(t, cli["c"].ID, "ip", "-4", "addr", "show", "eth0"); !strings.Contains(got, "inet "+cliIP+"/") {
		t.Errorf("eth0 in the pod:\n%s\nwant %s on it", got, cliIP)
	}
	if got := r.execOut(t, cli["c"].ID, "cat", "/etc/hosts"); !strings.Contains(got, cliIP+"\tclient-node1\n") {
		t.Errorf("/etc/hosts in the pod:\n%s\nwant %s with the pod's name", got, cliIP)
	}
	if got := r.execOut(t, cli["c"].ID, "sh", "-c", "echo $POD_IP"); strings.TrimSpace(got) != cliIP {
		t.Errorf("status.podIP through the downward API: %q, want %s", got, cliIP)
	}
	page := r.execOut(t, cli["c"].ID, "sh", "-c", fmt.Sprintf("for i in $(seq 50); do wget -q -O - http://%s:8080/ && exit; sleep 0.1; done; exit 1", srvIP))
	if strings.TrimSpace(page) != "hello from server-node1" {
		t.Errorf("the client fetched %q from the server's pod IP, want its page", page)
	}
	// lo is up beside the pod network, with no loopback plugin in the network.
	if local := r.execOut(t, srv["httpd"].ID, "wget", "-q", "-O", "-", "http://127.0.0.1:8080/"); strings.TrimSpace(local) != "hello from server-node1" {
		t.Errorf("the server fetched %q from 127.0.0.1 in its own pod, want its page", local)
	}

	r.removePod(t, srv)
	r.removePod(t, cli)
	assertNoLeaks(t, n)
}

// removePod removes the containers of a pod mustRunPod ran, then its sandboxes.
func (r *testRuntime) removePod(t *testing.T, pod map[string]runner.Container) {
	t.Helper()
	var uid types.UID
	for _, c := range pod {
		r.mustRemove(t, c.ID)
		uid = c.PodUID
	}
	for _, c := range r.listAll(t) {
		if c.PodUID == uid && c.Kind == runner.KindSandbox {
			r.mustRemove(t, c.ID)
		}
	}
}

// What pods send off the host leaves with the host's address: the default network
// masquerades its subnet with one chain of staticpod's, however many pods run, in
// place of the bridge plugin's chain for each pod. The masquerade is the network's: it
// stays when the pods go.
func TestPodNetworkMasqueradesWhatLeavesTheHost(t *testing.T) {
	n := testenv.CNI(t, testBridge)
	outside := testenv.NewOutside(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		host, _, _ := net.SplitHostPort(req.RemoteAddr)
		fmt.Fprint(w, host)
	}))
	srv.Listener = outside.Listen(t)
	srv.Start()
	defer srv.Close()
	r := newTestRuntime(t, withCNI(n))
	fetch := fmt.Sprintf("for i in $(seq 5); do timeout 3 wget -q -O - %s/ && exit; sleep 0.1; done; exit 1", srv.URL)
	pod := func(name string) map[string]runner.Container {
		return r.mustRunPod(t, loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+name+"}\nspec:\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n"))
	}
	a, b := pod("a"), pod("b")
	for _, p := range []map[string]runner.Container{a, b} {
		r.awaitState(t, p["c"].ID, runner.StateRunning)
		if got := r.execOut(t, p["c"].ID, "sh", "-c", fetch); got != outside.HostIP {
			t.Errorf("the outside host saw the pod's request come from %q, want the host's %s", got, outside.HostIP)
		}
	}
	if rules := n.Masquerade(); len(rules) != 4 {
		t.Errorf("with two pods running the network's masquerade is:\n  %s\nwant a jump and the chain's three rules", strings.Join(rules, "\n  "))
	}
	for _, leak := range n.Leaks() {
		if strings.HasPrefix(leak, "iptables") {
			t.Errorf("a pod has an iptables rule of its own: %s", leak)
		}
	}
	r.removePod(t, a)
	r.removePod(t, b)
	assertNoLeaks(t, n)
	if rules := n.Masquerade(); len(rules) != 4 {
		t.Errorf("with the pods gone the network's masquerade is:\n  %s\nwant it kept", strings.Join(rules, "\n  "))
	}
}

// A pod that shares its PID namespace has a sandbox process: its network namespace gets
// the pod network too, pinned so that the network is torn down in it when the sandbox
// stops.
func TestPauseSandboxNetwork(t *testing.T) {
	n := testenv.CNI(t, testBridge)
	r := newTestRuntime(t, withCNI(n))
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: sharepid}
spec:
  shareProcessNamespace: true
  containers:
  - {name: c, image: `+testImage+`, command: [sleep, "3600"]}
`)
	sb, err := r.startSandbox(pod, 0, manifests.Objects{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mustRemove(t, sb.ID) })
	if sb.PID == 0 || len(sb.IPs) != 1 {
		t.Fatalf("sandbox: pid %d, IPs %v; want a process and one pod IP", sb.PID, sb.IPs)
	}
	if got := nsInode(t, filepath.Join(r.pinDir(sb.ID), "net")); got != nsInode(t, fmt.Sprintf("/proc/%d/ns/net", sb.PID)) {
		t.Errorf("the pinned network namespace is not the sandbox process's")
	}
	// The sandbox process brought lo up: the network has no loopback plugin.
	if out, err := exec.Command("nsenter", "-t", strconv.Itoa(int(sb.PID)), "-n", "ip", "-o", "link", "show", "lo").CombinedOutput(); err != nil || !strings.Contains(string(out), ",UP") {
		t.Errorf("lo in the sandbox's network namespace: %s (%v), want it up", out, err)
	}
	if listed, _ := r.find(t, sb.ID); !slices.Equal(listed.IPs, sb.IPs) {
		t.Errorf("List reports the sandbox with IPs %v, want %v", listed.IPs, sb.IPs)
	}
	if err := r.StopContainer(r.ctx, sb.ID, 0); err != nil {
		t.Fatal(err)
	}
	r.awaitState(t, sb.ID, runner.StateExited)
	assertNoLeaks(t, n)
	if _, err := os.Stat(r.pinDir(sb.ID)); !os.IsNotExist(err) {
		t.Errorf("the pin of a stopped sandbox process: %v, want it gone", err)
	}
}

// A pod network that cannot be set up fails the sandbox with the plugin's message and
// leaves nothing of it behind: no record, no pins, no address.
func TestPodNetworkSetupFails(t *testing.T) {
	pod := func(t *testing.T, name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers:\n  - {name: c, image: " + testImage + ", command: [sleep, \"3600\"]}\n"
	}
	tests := []struct {
		name     string
		conflist func(testenv.CNINetwork) []byte
		want     string
	}{
		{"a plugin missing", func(n testenv.CNINetwork) []byte {
			return []byte(strings.Replace(string(testBridge(n)), `"portmap"`, `"no-such-plugin"`, 1))
		}, `failed to find plugin "no-such-plugin"`},
		{"a broken configuration", func(testenv.CNINetwork) []byte { return []byte(`{"cniVersion": "1.0.0", "name": `) }, "CNI configuration in"},
		{"addresses exhausted", func(n testenv.CNINetwork) []byte {
			// A /30 holds two addresses: the bridge's and one pod's.
			_, subnet, _ := net.ParseCIDR(n.Subnet)
			return podnet.Bridge{Name: n.Name, Bridge: n.Bridge, Subnet: subnet.IP.String() + "/30", DataDir: n.DataDir}.Conflist()
		}, "no IP addresses available"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := testenv.CNI(t, tt.conflist)
			r := newTestRuntime(t, withCNI(n))
			if tt.want == "no IP addresses available" {
				r.mustRunPod(t, loadPod(t, pod(t, "first")))
			}
			_, err := r.startSandbox(loadPod(t, pod(t, "failing")), 0, manifests.Objects{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("StartSandbox: %v, want an error with %q", err, tt.want)
			}
			for _, c := range r.listAll(t) {
				if strings.HasPrefix(c.PodName, "failing") {
					t.Errorf("the failed sandbox is still recorded: %+v", c)
				}
			}
			pins, _ := filepath.Glob(filepath.Join(r.cfg.RootDir, namespacesDir, "failing*"))
			if len(pins) > 0 {
				t.Errorf("the failed sandbox's pins are left: %v", pins)
			}
			if tt.want != "no IP addresses available" {
				assertNoLeaks(t, n)
			}
		})
	}
}

// Without a network configuration a pod has loopback only, and its sandbox says why;
// one of a runtime asked for no pod network (no configuration directory, as `once`)
// says nothing.
func TestNoCNIConfiguration(t *testing.T) {
	dir := t.TempDir()
	r := newTestRuntime(t, func(cfg *Config) { cfg.CNI = podnet.Config{ConfDir: dir, BinDirs: testenv.CNIBinDirs} })
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: lo}\nspec:\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	r.mustRunPod(t, pod)
	sb := r.sandboxOf(t, pod)
	if len(sb.IPs) != 0 || !strings.Contains(sb.NetworkNote, "no CNI configuration in "+dir) {
		t.Errorf("sandbox without a network: IPs %v, note %q", sb.IPs, sb.NetworkNote)
	}
	none := newTestRuntime(t)
	none.mustRunPod(t, pod)
	if sb := none.sandboxOf(t, pod); len(sb.IPs) != 0 || sb.NetworkNote != "" {
		t.Errorf("sandbox of a runtime without a configuration directory: IPs %v, note %q; want neither", sb.IPs, sb.NetworkNote)
	}
}

// A pod network outlives what leads to it: a sandbox whose record containerd lost is
// torn down from its pin directory by the next repair, and one whose namespace is gone
// (a reboot) has its address released when it is removed.
func TestPodNetworkTornDownWithoutItsRecord(t *testing.T) {
	n := testenv.CNI(t, testBridge)
	r := newTestRuntime(t, withCNI(n))
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: lost}\nspec:\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n  - {name: d, image: "+testImage+", command: [sleep, \"3600\"], ports: [{containerPort: 80, hostPort: 18080}]}\n")
	sb, err := r.startSandbox(pod, 0, manifests.Objects{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Leaks()) == 0 {
		t.Fatal("a pod network with a hostPort shows nothing on the host: the leak check sees nothing")
	}
	// containerd forgets the sandbox.
	ctx, cancel := r.call(context.Background())
	defer cancel()
	if err := r.client.ContainerService().Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.relist(r.ctx); err != nil {
		t.Fatal(err)
	}
	assertNoLeaks(t, n)
	if _, err := os.Stat(r.pinDir(sb.ID)); !os.IsNotExist(err) {
		t.Errorf("pins of the forgotten sandbox: %v, want them gone", err)
	}

	// A reboot: the namespaces are gone, the records stay.
	sb, err = r.startSandbox(pod, 1, manifests.Objects{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"net", "ipc", "uts"} {
		if err := unix.Unmount(filepath.Join(r.pinDir(sb.ID), ns), unix.MNT_DETACH); err != nil {
			t.Fatal(err)
		}
	}
	r.awaitState(t, sb.ID, runner.StateExited)
	if err := r.RemoveContainer(r.ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	for _, leak := range n.Leaks() {
		if !strings.HasPrefix(leak, "iptables") { // a reboot would have taken those
			t.Errorf("after the removal of a sandbox whose namespace is gone: %s", leak)
		}
	}
}

// A pod network whose iptables rules are gone (a reload of the host's firewall
// flushed them) is still torn down: the pod stops, its address is released.
func TestPodNetworkTornDownAfterAFirewallReload(t *testing.T) {
	n := testenv.CNI(t, testBridge)
	r := newTestRuntime(t, withCNI(n))
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: flushed}\nspec:\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"], ports: [{containerPort: 80, hostPort: 18081}]}\n")
	sb, err := r.startSandbox(pod, 0, manifests.Objects{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.FlushRules(); err != nil {
		t.Fatal(err)
	}
	if err := r.StopContainer(r.ctx, sb.ID, 0); err != nil {
		t.Fatalf("StopContainer after the rules were flushed: %v", err)
	}
	r.awaitState(t, sb.ID, runner.StateExited)
	if err := r.RemoveContainer(r.ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	assertNoLeaks(t, n)
}

// podIPOf is the IP of the running sandbox of the pod with uid.
func (r *testRuntime) podIPOf(t *testing.T, uid any) string {
	t.Helper()
	for _, c := range r.listAll(t) {
		if fmt.Sprint(c.PodUID) == fmt.Sprint(uid) && c.Kind == runner.KindSandbox && c.State == runner.StateRunning {
			if len(c.IPs) != 1 {
				t.Fatalf("sandbox %s has IPs %v, want one", c.ID, c.IPs)
			}
			return c.IPs[0]
		}
	}
	t.Fatalf("no running sandbox for pod %v", uid)
	return ""
}

func (r *testRuntime) listAll(t *testing.T) []runner.Container {
	t.Helper()
	all, err := r.relist(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// A sandbox whose network setup a staticpod was making when it stopped (its record and
// network there, its IPs not recorded) is stopped by the repair after the next
// staticpod's first relist, its network torn down, so that its pod starts over in a new sandbox with an address
// it knows; pinned sandboxes and sandbox processes alike. A setup that gave no address
// is recorded as such, and is no interrupted one.
func TestInterruptedPodNetworkSetupIsUndone(t *testing.T) {
	n := testenv.CNI(t, testBridge)
	r := newTestRuntime(t, withCNI(n))
	for _, shared := range []bool{false, true} {
		pod := loadPod(t, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: cut-%v}\nspec:\n  shareProcessNamespace: %v\n  containers:\n  - {name: c, image: %s, command: [sleep, \"3600\"]}\n", shared, shared, testImage))
		sb, err := r.startSandbox(pod, 0, manifests.Objects{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.setLabels(r.ctx, sb.ID, map[string]string{labelPodIPs: ""}); err != nil { // as if killed before it was written
			t.Fatal(err)
		}
		if _, err := r.relist(r.ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := r.find(t, sb.ID); got.State != runner.StateRunning {
			t.Fatalf("shared=%v: a setup this Runtime made was taken for an interrupted one: %s", shared, got.State)
		}
		next := newTestRuntimeOn(t, ctd.Daemon(t), func(cfg *Config) { *cfg = r.cfg })
		next.awaitState(t, sb.ID, runner.StateExited)
		if err := next.RemoveContainer(next.ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		if err := next.RemovePodData(next.ctx, pod.UID); err != nil {
			t.Fatal(err)
		}
		assertNoLeaks(t, n)
	}
	if got := podIPsLabel(nil); got != noPodIPs {
		t.Errorf("labelPodIPs of a setup without addresses: %q, want %q", got, noPodIPs)
	}
}
