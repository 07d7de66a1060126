package runner

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/events"
	"github.com/staticpod/staticpod/runner/node"
	"github.com/staticpod/staticpod/runner/restrict"
)

// testNode is a node labelled disktype=ssd, tainted dedicated=camera:NoExecute, with
// 1 CPU and 1Gi of memory allocatable.
func testNode(t *testing.T) *corev1.Node {
	t.Helper()
	n, err := node.New(node.Config{Name: "n", Labels: map[string]string{"disktype": "ssd"},
		Taints:   []corev1.Taint{{Key: "dedicated", Value: "camera", Effect: corev1.TaintEffectNoExecute}},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func requesting(p *corev1.Pod, memory string) *corev1.Pod {
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}}}}
	return p
}

// Pods that are not for the node are refused with the kubelet's reasons, each once
// and alone: the pods for it start, and a refused pod requests nothing of the node.
func TestAdmitRefusesPodsNotForTheNode(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	l.host = Host{Node: testNode(t)}
	var spawned []string
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w.pod.Name) }
	ssd := testPod(t, "ssd", "httpd", corev1.RestartPolicyAlways)
	ssd.Spec.NodeSelector = map[string]string{"disktype": "ssd"}
	hdd := testPod(t, "hdd", "httpd", corev1.RestartPolicyAlways)
	hdd.Spec.NodeSelector = map[string]string{"disktype": "hdd"}
	untolerant := testPod(t, "untolerant", "httpd", corev1.RestartPolicyAlways)
	untolerant.Spec.Tolerations = nil // as a pod of the URL has none
	hog := requesting(testPod(t, "hog", "httpd", corev1.RestartPolicyAlways), "2Gi")
	hog.Spec.NodeSelector = map[string]string{"disktype": "hdd"} // refused for that first: it holds no memory
	big := requesting(testPod(t, "big", "httpd", corev1.RestartPolicyAlways), "1Gi")
	critical := requesting(testPod(t, "critical", "httpd", corev1.RestartPolicyAlways), "1Gi")
	critical.Spec.PriorityClassName = "system-node-critical"
	more := requesting(testPod(t, "more", "httpd", corev1.RestartPolicyAlways), "1Mi")
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		t.Fatal(err)
	}
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{ssd, hdd, untolerant, hog, big, critical, more}})

	slices.Sort(spawned)
	if want := []string{"big-n", "critical-n", "ssd-n"}; !cmp.Equal(want, spawned) {
		t.Errorf("started %v, want %v", spawned, want)
	}
	want := map[string][2]string{
		"hdd-n":        {"NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		"hog-n":        {"NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		"untolerant-n": {"TaintToleration", "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"},
		"more-n":       {"OutOfmemory", "Node didn't have enough resource: memory, requested: 1048576, used: 2147483648, capacity: 1073741824"},
	}
	got := map[string][2]string{}
	for _, p := range h.r.Pods() {
		if p.Status.Phase == corev1.PodFailed {
			got[p.Name] = [2]string{p.Status.Reason, p.Status.Message}
			if evs := h.r.events.Pod(p.UID); len(evs) != 1 || evs[0].Reason != p.Status.Reason || evs[0].Type != events.Warning {
				t.Errorf("events of %s: %+v", p.Name, evs)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused pods (-want +got):\n%s", diff)
	}
}

// What a running pod requests is its own: a newcomer that would not fit beside it is
// refused, however the two sort.
func TestAdmitKeepsTheRequestsOfRunningPods(t *testing.T) {
	a := requesting(sourcePod("a", "a", "file"), "600Mi")
	b := requesting(sourcePod("b", "b", "file"), "600Mi")
	desired := map[types.UID]*corev1.Pod{"a": a, "b": b}
	n := testNode(t)
	n.Spec.Taints = nil
	for _, tc := range []struct {
		running string
		leaving []*corev1.Pod
		want    []string
	}{
		{running: "", want: []string{"b"}},
		{running: "b", want: []string{"a"}},
		{running: "", leaving: []*corev1.Pod{requesting(sourcePod("c", "c", "file"), "600Mi")}, want: []string{"a", "b"}},
		{running: "", leaving: []*corev1.Pod{requesting(sourcePod("a0", "a", "file"), "600Mi")}, want: []string{"b"}}, // a's previous instance
	} {
		rejected := Admit(desired, restrict.Restrictions{}, Host{Node: n}, func(uid types.UID) bool { return string(uid) == tc.running }, tc.leaving)
		var got []string
		for uid, rej := range rejected {
			if rej.Reason() != node.ReasonOutOfMemory {
				t.Errorf("%s refused for %s", uid, rej.Reason())
			}
			got = append(got, string(uid))
		}
		slices.Sort(got)
		if !cmp.Equal(tc.want, got) {
			t.Errorf("running %q, leaving %d: refused %v, want %v", tc.running, len(tc.leaving), got, tc.want)
		}
	}
}
