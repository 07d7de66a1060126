package e2e

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// An edit of hostNetwork in a manifest that gives its metadata.uid recreates the pod's
// sandbox, as the kubelet does when a pod's network namespace mode changed: the pod
// keeps its UID, its container is stopped and started again (restart count 1) on the
// host's network, and the old sandbox goes with its pinned namespaces and its pod
// network. Edited back, the pod gets a new sandbox and a pod IP again.
func TestEditOfHostNetworkUnderAGivenUIDRecreatesTheSandbox(t *testing.T) {
	const uid = "9d3c7a15-2b4e-4f60-8c1d-5e7f9a0b2c43"
	n, cn := newCNINode(t, bridgeConf)
	n.start(cniFlags(cn)...)
	manifest := func(hostNetwork bool) string {
		return withUID(podManifest("web", "Always", "trap 'exit 0' TERM; sleep 3600 & wait",
			fmt.Sprintf("  hostNetwork: %t\n", hostNetwork)), uid)
	}
	hostNet := netnsLink(t, os.Getpid())

	n.write("web.yaml", manifest(false))
	v0 := n.await("web running on its pod network", time.Minute, running("web-node1/main/0"))["web-node1/main/0"]
	if got := netnsLink(t, int(v0.PID)); got == hostNet {
		t.Fatalf("the pod's container runs in the host's network namespace %s, want its own", got)
	}
	ip := n.awaitPodIPs("web-node1")["web-node1"].Status.PodIP
	if _, subnet, _ := net.ParseCIDR(cn.Subnet); !subnet.Contains(net.ParseIP(ip)) {
		t.Fatalf("pod IP %q, want one in %s", ip, cn.Subnet)
	}
	pins := n.pins()
	if len(pins) != 1 {
		t.Fatalf("pins %v, want the pod's one sandbox", pins)
	}

	n.write("web.yaml", manifest(true))
	cs := n.await("the container restarted, the old one stopped", time.Minute, func(cs map[string]runner.Container) bool {
		return running("web-node1/main/1")(cs) && cs["web-node1/main/0"].State != runner.StateRunning
	})
	v1 := cs["web-node1/main/1"]
	if got := netnsLink(t, int(v1.PID)); got != hostNet {
		t.Errorf("after the edit to hostNetwork: true the container runs in network namespace %s, want the host's %s", got, hostNet)
	}
	if v1.PodUID != uid {
		t.Errorf("after the edit the pod runs under uid %s, want the manifest's %s still", v1.PodUID, uid)
	}
	n.awaitPins(0)
	n.assertUnmounted(pins)
	if sb := n.runningSandboxes("web-node1"); len(sb) != 0 {
		t.Errorf("sandboxes still running after the edit to hostNetwork: true: %v", sb)
	}
	assertNoLeaks(t, cn)
	if out, _, _ := runSplit(t, "", nil, "describe", "web-node1", "--api-socket", n.path("staticpod.sock")); !strings.Contains(out, "SandboxChanged") {
		t.Errorf("describe web-node1 does not tell that the sandbox changed:\n%s", out)
	}
	var pod corev1.Pod
	// /pods has the edit once the worker heard the start, a moment after it ran.
	testenv.Await(t, "GET /pods to show the edit", 10*time.Second, func() bool {
		pod = n.pods()["web-node1"]
		return pod.Spec.HostNetwork && containerStatus(&pod, "main").RestartCount == 1
	})
	if pod.UID != types.UID(uid) || !pod.Spec.HostNetwork || containerStatus(&pod, "main").RestartCount != 1 {
		t.Errorf("GET /pods: uid %s, hostNetwork %t, restart count %d; want %s, true, 1",
			pod.UID, pod.Spec.HostNetwork, containerStatus(&pod, "main").RestartCount, uid)
	}

	n.write("web.yaml", manifest(false))
	v2 := n.await("the container restarted in a new sandbox", time.Minute, running("web-node1/main/2"))["web-node1/main/2"]
	if got := netnsLink(t, int(v2.PID)); got == hostNet {
		t.Errorf("edited back to hostNetwork: false, the container runs in the host's network namespace %s", got)
	}
	n.awaitPins(1)
	if now := n.pins(); now[0] == pins[0] {
		t.Errorf("edited back, the pod's pins are the first sandbox's %s, want a new sandbox's", now[0])
	}
	if ip := n.awaitPodIPs("web-node1")["web-node1"].Status.PodIP; ip == "" {
		t.Error("edited back, the pod has no pod IP")
	}
	n.removeAllAndCheck(pins)
	assertNoLeaks(t, cn)
}

// The same for an edit that keeps the pod on its own network: a new hostname is the
// new sandbox's, whose UTS namespace the restarted container joins.
func TestEditOfHostnameUnderAGivenUIDRecreatesTheSandbox(t *testing.T) {
	const uid = "4e1b8c27-6a3d-4f95-b0c2-7d8e9f1a2b34"
	n := newNode(t)
	n.start()
	manifest := func(hostname string) string {
		return withUID(podManifest("named", "Always", "trap 'exit 0' TERM; echo $(hostname); sleep 3600 & wait",
			"  hostname: "+hostname+"\n"), uid)
	}
	n.write("named.yaml", manifest("one"))
	v0 := n.await("the pod running", time.Minute, running("named-node1/main/0"))["named-node1/main/0"]
	awaitFile(t, v0.LogPath, "stdout F one")
	pins := n.pins()

	n.write("named.yaml", manifest("two"))
	v1 := n.await("the container restarted", time.Minute, running("named-node1/main/1"))["named-node1/main/1"]
	awaitFile(t, v1.LogPath, "stdout F two")
	n.awaitPins(1)
	if now := n.pins(); len(pins) != 1 || now[0] == pins[0] {
		t.Errorf("pins %v after the edit, %v before: want a new sandbox's in place of the old", now, pins)
	}
	n.assertUnmounted(pins)
	n.awaitRelists(5) // each wakes the pod's worker: a new sandbox taken for changed would restart it
	if c, again := n.containers()["named-node1/main/2"]; again {
		t.Errorf("the pod restarted again in its new sandbox: %+v", c)
	}
	if v1.PodUID != uid {
		t.Errorf("after the edit the pod runs under uid %s, want the manifest's %s still", v1.PodUID, uid)
	}
}

// netnsLink is the network namespace of process pid, as /proc/<pid>/ns/net names it.
func netnsLink(t *testing.T, pid int) string {
	t.Helper()
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		t.Fatal(err)
	}
	return link
}

// runningSandboxes lists the running sandboxes of the named pod (with its node suffix).
func (n *node) runningSandboxes(pod string) []string {
	n.t.Helper()
	all, err := n.rt.List(n.ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, c := range all {
		if c.Kind == runner.KindSandbox && c.PodName == pod && c.State == runner.StateRunning {
			out = append(out, c.ID)
		}
	}
	return out
}
