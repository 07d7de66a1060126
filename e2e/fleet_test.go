package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/runner"
)

// fleetManifests is what a fleet's one manifest server serves every device: a pod for
// cameras (nodeSelector), one for gates (required node affinity, tolerating the gates'
// taint), one for the node named cam-1 alone (matchFields), and one for every device
// that tolerates nothing.
var fleetManifests = strings.Join([]string{
	podManifest("camera", "Always", "sleep 3600", "  nodeSelector: {device: camera}\n"),
	podManifest("gate", "Always", "sleep 3600",
		"  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: device, operator: In, values: [gate, door]}]}]}}}\n",
		"  tolerations: [{key: dedicated, operator: Equal, value: gate, effect: NoExecute}]\n"),
	podManifest("cam1only", "Always", "sleep 3600",
		"  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [cam-1]}]}]}}}\n"),
	podManifest("everywhere", "Always", "sleep 3600"),
}, "---\n")

// fleetNode is a node of the fleet: its daemon reads the fleet's URL as the node named
// name, with the extra flags.
func fleetNode(t *testing.T, url, name string, extra ...string) *node {
	n := newNode(t)
	n.start(append([]string{"--manifest-url", url, "--http-check-frequency", "200ms", "--hostname-override", name}, extra...)...)
	return n
}

// Two devices with different labels, one of them tainted, read one URL: each runs the
// pods meant for it, and reports the others Failed with the kubelet's reasons and an
// event, having started nothing of them.
func TestFleetFromOneURLRunsEachNodeItsPods(t *testing.T) {
	srv := httptest.NewServer(&manifestServer{body: fleetManifests})
	defer srv.Close()
	cam := fleetNode(t, srv.URL, "cam-1", "--node-labels", "device=camera,site=north")
	gate := fleetNode(t, srv.URL, "gate-1", "--node-labels", "device=gate", "--register-with-taints", "dedicated=gate:NoExecute")

	const affinity = "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
	const taint = "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
	for _, tc := range []struct {
		n       *node
		runs    []string
		refused map[string][2]string // pod -> reason, message
	}{
		{cam, []string{"camera-cam-1", "cam1only-cam-1", "everywhere-cam-1"},
			map[string][2]string{"gate-cam-1": {"NodeAffinity", affinity}}},
		{gate, []string{"gate-gate-1"},
			map[string][2]string{"camera-gate-1": {"NodeAffinity", affinity}, "cam1only-gate-1": {"NodeAffinity", affinity}, "everywhere-gate-1": {"TaintToleration", taint}}},
	} {
		for _, pod := range tc.runs {
			tc.n.await(pod+" running", time.Minute, running(pod+"/main/0"))
		}
		for pod, want := range tc.refused {
			st := tc.n.awaitPhase(pod, corev1.PodFailed).Status
			if st.Reason != want[0] || st.Message != want[1] {
				t.Errorf("%s: status %q %q, want %q %q", pod, st.Reason, st.Message, want[0], want[1])
			}
			tc.n.awaitEvent(want[0], want[1])
		}
		tc.n.awaitRelists(3) // chances to start what it must not
		all, err := tc.n.rt.List(tc.n.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range all {
			if _, refused := tc.refused[c.PodName]; refused {
				t.Errorf("refused pod %s has a %s %s", c.PodName, c.Kind, c.Name)
			}
		}
		if cs := tc.n.containers(); len(cs) != len(tc.runs) {
			t.Errorf("containers %v, want those of %v", cs, tc.runs)
		}
	}

	// The node as the API and the CLI show it.
	code, body := gate.apiGet("/node")
	var n corev1.Node
	if code != http.StatusOK || json.Unmarshal(body, &n) != nil {
		t.Fatalf("GET /node = %d %s", code, body)
	}
	if n.Name != "gate-1" || n.Labels["device"] != "gate" || n.Labels[corev1.LabelHostname] != "gate-1" || n.Labels[corev1.LabelOSStable] != "linux" ||
		len(n.Spec.Taints) != 1 || n.Spec.Taints[0].ToString() != "dedicated=gate:NoExecute" || n.Status.Allocatable.Memory().IsZero() {
		t.Errorf("GET /node = %s", body)
	}
	out, exit := runStaticpod(t, "describe", "--api-socket", gate.path("staticpod.sock"), "node")
	for _, want := range []string{"Name:", "gate-1", "device=gate", "dedicated=gate:NoExecute", "Ready", "KubeletReady", "Non-terminated Pods: (1 in total)", "gate-gate-1"} {
		if exit != 0 || !strings.Contains(out, want) {
			t.Errorf("describe node: exit %d, output lacks %q:\n%s", exit, want, out)
		}
	}
}

// A pod that requests more memory than the node has allocatable is refused with the
// kubelet's OutOfmemory, and disturbs no other pod; a system-node-critical one is
// admitted all the same (and counts: the node is then overcommitted).
func TestResourceAdmissionRefusesWhatTheNodeCannotHold(t *testing.T) {
	n := newNode(t)
	requests := "    resources: {requests: {memory: 1Pi}}\n"
	n.write("hog.yaml", podManifest("hog", "Always", "sleep 3600")+requests)
	n.write("critical.yaml", podManifest("critical", "Always", "sleep 3600", "  priorityClassName: system-node-critical\n")+requests)
	n.write("small.yaml", podManifest("small", "Always", "sleep 3600")) // requests nothing: never refused for resources
	n.start("--system-reserved", "cpu=100m,memory=64Mi", "--kube-reserved", "memory=64Mi")
	n.await("critical and small running", time.Minute, func(cs map[string]runner.Container) bool {
		return running("critical-node1/main/0")(cs) && running("small-node1/main/0")(cs)
	})
	st := n.awaitPhase("hog-node1", corev1.PodFailed).Status
	if st.Reason != "OutOfmemory" || !strings.HasPrefix(st.Message, "Node didn't have enough resource: memory, requested: 1125899906842624, used: ") {
		t.Errorf("hog: status %q %q, want OutOfmemory", st.Reason, st.Message)
	}
	n.awaitEvent("OutOfmemory", "requested: 1125899906842624")
	code, body := n.apiGet("/node")
	var node corev1.Node
	if code != http.StatusOK || json.Unmarshal(body, &node) != nil {
		t.Fatalf("GET /node = %d %s", code, body)
	}
	capacity, alloc := node.Status.Capacity.Memory().DeepCopy(), node.Status.Allocatable.Memory()
	capacity.Sub(*alloc)
	if capacity.String() != "128Mi" {
		t.Errorf("capacity - allocatable = %s, want the 128Mi reserved", capacity.String())
	}
}
