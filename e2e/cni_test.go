package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/podnet"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// bridgeConf is what --cni-default-bridge writes, for a test network: its own bridge,
// subnet and allocations.
func bridgeConf(n testenv.CNINetwork) []byte {
	return podnet.Bridge{Name: n.Name, Bridge: n.Bridge, Subnet: n.Subnet, DataDir: n.DataDir}.Conflist()
}

// newCNINode is a node whose staticpod runs pods on a test network; cniFlags are the
// flags that say so. The network is made first, so that it is cleaned up last, after
// the node's pods are gone.
func newCNINode(t testing.TB, conflist func(testenv.CNINetwork) []byte) (*node, *testenv.CNINetwork) {
	t.Helper()
	cn := testenv.CNI(t, conflist)
	n := newNode(t)
	cn.CacheDir = n.path("root/cni/cache") // where staticpod keeps libcni's cache
	return n, cn
}

func cniFlags(cn *testenv.CNINetwork) []string {
	flags := []string{"--cni-conf-dir", cn.ConfDir}
	for _, d := range cn.BinDirs {
		flags = append(flags, "--cni-bin-dir", d)
	}
	return flags
}

// assertNoLeaks fails t if the network still holds anything on the host.
func assertNoLeaks(t testing.TB, cn *testenv.CNINetwork) {
	t.Helper()
	if leaks := cn.Leaks(); len(leaks) > 0 {
		t.Errorf("left on the host's network:\n  %s", strings.Join(leaks, "\n  "))
	}
}

// freePort is a port nothing on the host listens on for network (tcp or udp).
func freePort(t testing.TB, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// udpEcho builds the UDP echo server for pods, static, into a directory of its own.
func udpEcho(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "udpecho"), "./internal/testenv/cmd/udpecho")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build udpecho: %v\n%s", err, out)
	}
	return dir
}

// execIn runs a command in a container of a pod through `staticpod exec` and returns
// its output and exit code.
func (n *node) execIn(pod string, cmd ...string) (string, int) {
	n.t.Helper()
	args := []string{"exec", "--api-socket", n.path("staticpod.sock"), pod, "--"}
	out, err := exec.Command(binary, append(args, cmd...)...).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		n.t.Fatalf("staticpod exec: %v", err)
	}
	return string(out), 0
}

// httpGet fetches url from the host, trying again until it answers or 30 s pass.
func httpGet(t testing.TB, url string) string {
	t.Helper()
	var body []byte
	var err error
	defer func() {
		if err != nil {
			t.Logf("GET %s: %v", url, err)
		}
	}()
	testenv.Await(t, "GET "+url, 30*time.Second, func() bool {
		var resp *http.Response
		if resp, err = (&http.Client{Timeout: 2 * time.Second}).Get(url); err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err == nil
	})
	return string(body)
}

// TestPodNetwork: two pods get distinct IPs on the pod network, shown by the API,
// `ps -o wide` and the downward API, and one fetches a page from the other; a pod's
// hostPorts (TCP and UDP) are reachable from the host on 127.0.0.1 and on the host's
// address, one bound to 127.0.0.1 only there; a pod reaches a server on the host.
// Removing the pods leaves nothing on the host's network.
func TestPodNetwork(t *testing.T) {
	n, cn := newCNINode(t, bridgeConf)
	n.start(cniFlags(cn)...)
	tcpPort, udpPort, localPort := freePort(t, "tcp"), freePort(t, "udp"), freePort(t, "tcp")
	n.write("web.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: bin, hostPath: {path: %s, type: Directory}}]
  containers:
  - name: httpd
    image: %s
    command: ["sh", "-c", "mkdir -p /www && echo hello from $(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports:
    - {containerPort: 8080, hostPort: %d}
    - {containerPort: 8080, hostPort: %d, hostIP: 127.0.0.1}
  - name: udp
    image: %s
    command: ["/testbin/udpecho", ":9999"]
    volumeMounts: [{name: bin, mountPath: /testbin, readOnly: true}]
    ports:
    - {containerPort: 9999, hostPort: %d, protocol: UDP}
`, udpEcho(t), e2eImage, tcpPort, localPort, e2eImage, udpPort))
	n.write("client.yaml", podManifest("client", "Always", "sleep 3600", "  terminationGracePeriodSeconds: 1\n")+
		"    env:\n    - name: POD_IP\n      valueFrom: {fieldRef: {fieldPath: status.podIP}}\n")
	n.await("both pods running", time.Minute, func(cs map[string]runner.Container) bool {
		return running("web-node1/httpd/0")(cs) && running("web-node1/udp/0")(cs) && running("client-node1/main/0")(cs)
	})

	pods := n.awaitPodIPs("web-node1", "client-node1")
	web, client := pods["web-node1"].Status, pods["client-node1"].Status
	_, subnet, _ := net.ParseCIDR(cn.Subnet)
	for _, st := range []corev1.PodStatus{web, client} {
		if !subnet.Contains(net.ParseIP(st.PodIP)) || len(st.PodIPs) != 1 || st.PodIPs[0].IP != st.PodIP {
			t.Errorf("pod IPs %q %v, want one in %s", st.PodIP, st.PodIPs, cn.Subnet)
		}
	}
	if web.PodIP == client.PodIP {
		t.Fatalf("both pods have IP %s", web.PodIP)
	}
	out, _, _ := runSplit(t, "", nil, "ps", "-o", "wide", "--api-socket", n.path("staticpod.sock"))
	for _, ip := range []string{web.PodIP, client.PodIP} {
		if !strings.Contains(out, " "+ip+" ") {
			t.Errorf("ps -o wide does not show IP %s:\n%s", ip, out)
		}
	}
	if got, code := n.execIn("client-node1", "sh", "-c", "echo $POD_IP"); code != 0 || strings.TrimSpace(got) != client.PodIP {
		t.Errorf("status.podIP through the downward API: %q (exit %d), want %s", got, code, client.PodIP)
	}
	fetch := fmt.Sprintf("for i in $(seq 100); do wget -q -O - http://%s:8080/ && exit; sleep 0.1; done; exit 1", web.PodIP)
	if got, code := n.execIn("client-node1", "sh", "-c", fetch); code != 0 || strings.TrimSpace(got) != "hello from web-node1" {
		t.Errorf("client fetching from web's pod IP: %q (exit %d)", got, code)
	}

	hostIP := n.rt.HostIP()
	for _, addr := range []string{"127.0.0.1", hostIP} {
		if got := httpGet(t, fmt.Sprintf("http://%s/", net.JoinHostPort(addr, strconv.Itoa(tcpPort)))); strings.TrimSpace(got) != "hello from web-node1" {
			t.Errorf("hostPort %d on %s: %q", tcpPort, addr, got)
		}
		if got := udpRoundTrip(t, net.JoinHostPort(addr, strconv.Itoa(udpPort))); got != "ping" {
			t.Errorf("UDP hostPort %d on %s answered %q, want ping", udpPort, addr, got)
		}
	}
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/", localPort)); strings.TrimSpace(got) != "hello from web-node1" {
		t.Errorf("hostPort %d on hostIP 127.0.0.1: %q", localPort, got)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(hostIP, strconv.Itoa(localPort)), 2*time.Second); err == nil {
		c.Close()
		t.Errorf("hostPort %d, bound to 127.0.0.1, answers on %s too", localPort, hostIP)
	}

	// A server on the host, on the pod network's gateway: the bridge's address.
	l, err := net.Listen("tcp", net.JoinHostPort(cn.Gateway, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello from the host\n") })}
	go srv.Serve(l)
	defer srv.Close()
	fetch = fmt.Sprintf("wget -q -O - http://%s/", l.Addr())
	if got, code := n.execIn("client-node1", "sh", "-c", fetch); code != 0 || strings.TrimSpace(got) != "hello from the host" {
		t.Errorf("client fetching from the host at %s: %q (exit %d)", l.Addr(), got, code)
	}

	n.removeAllAndCheck(nil)
	assertNoLeaks(t, cn)
}

// awaitPodIPs waits until the API reports a pod IP for each named pod (its status
// follows the containers' start by a sync of its worker).
func (n *node) awaitPodIPs(names ...string) map[string]corev1.Pod {
	n.t.Helper()
	var pods map[string]corev1.Pod
	testenv.Await(n.t, fmt.Sprintf("pod IPs of %v", names), 30*time.Second, func() bool {
		pods = n.pods()
		for _, name := range names {
			if pods[name].Status.PodIP == "" {
				return false
			}
		}
		return true
	})
	return pods
}

// udpRoundTrip sends "ping" to address and returns the answer, trying again for 30 s.
func udpRoundTrip(t testing.TB, address string) string {
	t.Helper()
	var got string
	testenv.Await(t, "an answer from UDP "+address, 30*time.Second, func() bool {
		c, err := net.Dial("udp", address)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Write([]byte("ping")); err != nil {
			return false
		}
		buf := make([]byte, 64)
		k, err := c.Read(buf)
		got = string(buf[:k])
		return err == nil
	})
	return got
}

// The pod networks of pods whose manifests went while staticpod was down (killed with
// -9) are torn down when it comes back, as are their pins: no veth, no IP allocation,
// no iptables rule is left, for pinned sandboxes and sandbox processes alike.
func TestPodNetworkAfterKill9(t *testing.T) {
	n, cn := newCNINode(t, bridgeConf)
	sp := n.start(cniFlags(cn)...)
	port := freePort(t, "tcp")
	n.write("a.yaml", podManifest("a", "Always", "sleep 3600", "  terminationGracePeriodSeconds: 1\n")+
		fmt.Sprintf("    ports: [{containerPort: 80, hostPort: %d}]\n", port))
	n.write("b.yaml", podManifest("b", "Always", "sleep 3600", "  terminationGracePeriodSeconds: 1\n  shareProcessNamespace: true\n"))
	n.write("c.yaml", podManifest("c", "Always", "sleep 3600", "  terminationGracePeriodSeconds: 1\n"))
	n.await("the pods running", time.Minute, func(cs map[string]runner.Container) bool {
		return running("a-node1/main/0")(cs) && running("b-node1/main/0")(cs) && running("c-node1/main/0")(cs)
	})
	before := n.pins()
	if len(before) != 3 || len(cn.Leaks()) == 0 {
		t.Fatalf("pins %v, network %v: want three pods' pins and their network on the host", before, cn.Leaks())
	}
	sp.kill9()
	for _, f := range []string{"a.yaml", "b.yaml"} {
		if err := os.Remove(filepath.Join(n.manifests, f)); err != nil {
			t.Fatal(err)
		}
	}
	n.start(cniFlags(cn)...)
	n.await("a and b gone, c running", time.Minute, func(cs map[string]runner.Container) bool {
		return len(cs) == 1 && running("c-node1/main/0")(cs)
	})
	n.awaitPins(1)
	// c's: a veth, an IP allocation (the masquerade is the network's, not the pod's).
	leaks := strings.Join(cn.Leaks(), "\n  ")
	if strings.Count(leaks, "veth ") != 1 || strings.Count(leaks, "IP allocation ") != 1 || strings.Contains(leaks, "a-node1") || strings.Contains(leaks, "b-node1") {
		t.Errorf("with only c left, the network holds:\n  %s", leaks)
	}
	n.removeAllAndCheck(before)
	assertNoLeaks(t, cn)
}

// A pod network that cannot be set up (a plugin missing) is the pod's waiting reason,
// with the plugin's message, and an event; staticpod tries again with a back-off and
// the pod starts once the configuration is fixed.
func TestPodNetworkSetupFailure(t *testing.T) {
	broken := func(n testenv.CNINetwork) []byte {
		return []byte(strings.Replace(string(bridgeConf(n)), `"type": "portmap"`, `"type": "no-such-plugin"`, 1))
	}
	n, cn := newCNINode(t, broken)
	sp := n.start(cniFlags(cn)...)
	n.write("a.yaml", podManifest("a", "Always", "sleep 3600", "  terminationGracePeriodSeconds: 1\n"))
	var st corev1.ContainerStatus
	testenv.Await(t, "a waiting for its pod network", time.Minute, func() bool {
		if p, ok := n.pods()["a-node1"]; ok && len(p.Status.ContainerStatuses) == 1 {
			st = p.Status.ContainerStatuses[0]
		}
		return st.State.Waiting != nil && st.State.Waiting.Reason == runner.ReasonCreatePodSandboxError
	})
	if msg := st.State.Waiting.Message; !strings.Contains(msg, `failed to find plugin "no-such-plugin"`) {
		t.Errorf("waiting message %q, want the plugin's", msg)
	}
	out, _, _ := runSplit(t, "", nil, "describe", "a-node1", "--api-socket", n.path("staticpod.sock"))
	if !strings.Contains(out, "FailedCreatePodSandBox") || !strings.Contains(out, "no-such-plugin") {
		t.Errorf("describe a-node1 does not tell why:\n%s", out)
	}
	out, _, _ = runSplit(t, "", nil, "ps", "--api-socket", n.path("staticpod.sock"))
	if !strings.Contains(out, runner.ReasonCreatePodSandboxError) {
		t.Errorf("ps does not tell why:\n%s", out)
	}
	assertNoLeaks(t, cn)

	if err := os.WriteFile(filepath.Join(cn.ConfDir, "10-"+cn.Name+".conflist"), bridgeConf(*cn), 0o644); err != nil {
		t.Fatal(err)
	}
	n.await("a running once the configuration is fixed", time.Minute, running("a-node1/main/0"))
	if sp.cmd.ProcessState != nil {
		t.Fatalf("staticpod exited: %v", sp.cmd.ProcessState)
	}
	n.removeAllAndCheck(nil)
	assertNoLeaks(t, cn)
}

// Without a network configuration pods have loopback only, as before; the log says so
// once, and describe in the pod's events.
func TestNoPodNetworkConfigured(t *testing.T) {
	n := newNode(t)
	confDir := t.TempDir()
	sp := n.start("--cni-conf-dir", confDir)
	n.write("a.yaml", podManifest("a", "Always", "sleep 3600", "  terminationGracePeriodSeconds: 1\n"))
	n.write("b.yaml", podManifest("b", "Always", "sleep 3600", "  terminationGracePeriodSeconds: 1\n"))
	n.await("the pods running", time.Minute, bothRunning)
	said := "no CNI configuration in " + confDir + ": pods not on the host network have loopback only"
	sp.awaitLog(said)
	if got := strings.Count(sp.out.String(), said); got != 1 {
		t.Errorf("the log says %d times %q, want once", got, said)
	}
	note := "no CNI configuration in " + confDir + ": the pod has loopback only"
	// containerd shows the containers running before the daemon has published the pod's
	// status from its next relist: describe reads the daemon.
	n.awaitPhase("a-node1", corev1.PodRunning)
	out, errOut, code := runSplit(t, "", nil, "describe", "a-node1", "--api-socket", n.path("staticpod.sock"))
	if !strings.Contains(out, "NoPodNetwork") || !strings.Contains(out, note) {
		t.Errorf("describe a-node1 (exit %d) does not say the pod has no network:\n%s\nstderr: %s", code, out, errOut)
	}
	if got, code := n.execIn("a-node1", "ls", "/sys/class/net"); code != 0 || strings.Fields(got)[0] != "lo" || len(strings.Fields(got)) != 1 {
		t.Errorf("interfaces of a pod without a pod network: %q (exit %d), want lo only", got, code)
	}
}

// --cni-default-bridge writes the default network's configuration where there is none,
// and leaves one that is there alone. staticpod masquerades the network's subnet from
// its start on, before any pod.
func TestCNIDefaultBridge(t *testing.T) {
	n := newNode(t)
	confDir := filepath.Join(t.TempDir(), "net.d")
	network := func(subnet string) *testenv.CNINetwork {
		return &testenv.CNINetwork{Name: podnet.DefaultNetworkName, Subnet: subnet}
	}
	b, err := podnet.DefaultBridge(n.path("root"))
	if err != nil {
		t.Fatal(err)
	}
	there := len(network(b.Subnet).Masquerade()) > 0 // another staticpod's default network
	sp := n.start("--cni-conf-dir", confDir, "--cni-default-bridge")
	sp.awaitLog("wrote the default pod network's configuration")
	sp.awaitLog("staticpod started") // the network read, its masquerade in place
	sp.stop()
	data, err := os.ReadFile(filepath.Join(confDir, "10-staticpod.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	if subnet := conf[podnet.MasqueradeKey]; subnet != b.Subnet {
		t.Errorf("the default network masquerades %v, want its subnet %s", subnet, b.Subnet)
	}
	if !there {
		t.Cleanup(func() {
			if err := network(b.Subnet).RemoveMasquerade(); err != nil {
				t.Errorf("remove the default network's masquerade: %v", err)
			}
		})
	}
	if rules := network(b.Subnet).Masquerade(); len(rules) != 4 {
		t.Errorf("the default network's masquerade of %s is:\n  %s\nwant a jump from POSTROUTING and the chain's three rules", b.Subnet, strings.Join(rules, "\n  "))
	}
	for _, want := range []string{`"name": "staticpod"`, `"bridge": "staticpod0"`, `"ipMasq": false`, `"io.staticpod.masquerade": "`, `"type": "portmap"`,
		`"dataDir": "` + n.path("root/cni/networks") + `"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the default configuration lacks %s:\n%s", want, data)
		}
	}
	if strings.Contains(string(data), `"type": "loopback"`) {
		t.Errorf("the default configuration runs the loopback plugin, whose work staticpod does itself:\n%s", data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	os.WriteFile(filepath.Join(confDir, "10-staticpod.conflist"), []byte(`{"name": "mine"}`), 0o644)
	sp = n.start("--cni-conf-dir", confDir, "--cni-default-bridge")
	sp.awaitLog("staticpod started")
	sp.stop()
	if data, _ := os.ReadFile(filepath.Join(confDir, "10-staticpod.conflist")); string(data) != `{"name": "mine"}` || ctx.Err() != nil {
		t.Errorf("an existing configuration was replaced: %s", data)
	}
}

// Two pods asking for the same host port: the second is refused, Failed with the
// kubelet's reason NodePorts, a message naming the port and the pod that has it, and
// an event; it runs, with the port, once the first is gone. validate reports it across
// files.
func TestHostPortTaken(t *testing.T) {
	n, cn := newCNINode(t, bridgeConf)
	n.start(cniFlags(cn)...)
	port := freePort(t, "tcp")
	web := func(name string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: %s
    command: ["sh", "-c", "mkdir -p /www && echo hello from $(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports: [{containerPort: 8080, hostPort: %d}]
`, name, e2eImage, port)
	}
	n.write("a.yaml", web("a"))
	n.write("b.yaml", web("b"))
	if out, code := runStaticpod(t, "validate", "--hostname-override", e2eNode, n.manifests); code != 1 ||
		!strings.Contains(out, fmt.Sprintf("error: %s: spec.containers[0].ports[0].hostPort: hostPort TCP 0.0.0.0:%d is already used by pod default/a-node1 in %s", filepath.Join(n.manifests, "b.yaml"), port, filepath.Join(n.manifests, "a.yaml"))) {
		t.Errorf("validate of two pods with one hostPort: exit %d\n%s", code, out)
	}
	b := n.awaitPhase("b-node1", corev1.PodFailed)
	want := fmt.Sprintf("Pod was rejected: spec.containers[0].ports[0].hostPort: hostPort TCP 0.0.0.0:%d is taken by pod default/a-node1 (file:%s)", port, filepath.Join(n.manifests, "a.yaml"))
	if b.Status.Reason != runner.ReasonNodePorts || b.Status.Message != want {
		t.Errorf("the refused pod: reason %q, message %q; want %s, %q", b.Status.Reason, b.Status.Message, runner.ReasonNodePorts, want)
	}
	api := []string{"--api-socket", n.path("staticpod.sock")}
	awaitPS(t, api, "b-node1 ", "NodePorts")
	if out, _, _ := runSplit(t, "", nil, append([]string{"describe", "b-node1"}, api...)...); !strings.Contains(out, "Warning  NodePorts") || !strings.Contains(out, want) {
		t.Errorf("describe b-node1 does not say why it was refused:\n%s", out)
	}
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); strings.TrimSpace(got) != "hello from a-node1" {
		t.Errorf("hostPort %d answered %q, want a's page", port, got)
	}
	if cs := n.containers(); len(cs) != 1 {
		t.Errorf("containers %v, want a's only", summary(cs))
	}

	if err := os.Remove(filepath.Join(n.manifests, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	n.await("b running once a is gone", time.Minute, func(cs map[string]runner.Container) bool {
		return len(cs) == 1 && running("b-node1/httpd/0")(cs)
	})
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); strings.TrimSpace(got) != "hello from b-node1" {
		t.Errorf("hostPort %d answered %q, want b's page", port, got)
	}
	n.removeAllAndCheck(nil)
	assertNoLeaks(t, cn)
}
