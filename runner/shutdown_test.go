package runner

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// At a shutdown the regular pods stop first, with their hooks, in the regular share of
// the shutdown grace period; the node-critical ones after them, in theirs; a pod whose
// own grace period is shorter keeps it.
func TestStopForShutdown(t *testing.T) {
	h := newHarness(t)
	hook := func(cmd string) *corev1.Container {
		return &corev1.Container{Name: "c", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}}}}
	}
	long, short := int64(600), int64(3)
	pods := map[string]*corev1.Pod{
		"etcd": testPod(t, "etcd", "sleep 1d", corev1.RestartPolicyAlways),
		"web":  testPod(t, "web", "sleep 1d", corev1.RestartPolicyAlways),
		"job":  testPod(t, "job", "sleep 1d", corev1.RestartPolicyAlways),
	}
	pods["etcd"].Spec.PriorityClassName = systemNodeCritical
	pods["etcd"].Spec.TerminationGracePeriodSeconds = &long
	pods["web"].Spec.TerminationGracePeriodSeconds = &long
	pods["job"].Spec.TerminationGracePeriodSeconds = &short
	for name, p := range pods {
		p.Spec.Containers[0].Lifecycle = hook(name + "-drain").Lifecycle
		h.r.pub.mu.Lock()
		h.r.pub.seen[p.UID] = h.clock()
		h.r.pub.mu.Unlock()
		h.r.pub.setStatus(p.UID, p)
		h.f.put(Container{ID: name, Kind: KindContainer, PodUID: p.UID, Name: "c", State: StateRunning, Source: "file"})
	}
	grace := ShutdownGrace{Total: 30 * time.Second, Critical: 10 * time.Second}
	if err := h.r.StopForShutdown(h.ctx, grace); err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(h.f.execs, "etcd: etcd-drain"); i != len(h.f.execs)-1 || len(h.f.execs) != 3 {
		t.Errorf("hooks run in the order %q, want every pod's, etcd's (node-critical) last", h.f.execs)
	}
	for id, want := range map[string]time.Duration{"web": grace.Regular(), "etcd": grace.Critical, "job": 3 * time.Second} {
		if got := h.f.graces[id]; got > want || got < want-time.Second { // less the hook's time
			t.Errorf("%s stopped with grace %v, want %v", id, got, want)
		}
	}
	for id := range pods {
		if c := h.f.containers[id]; c == nil || c.State != StateExited {
			t.Errorf("%s: %+v, want it stopped", id, c)
		}
	}
}

func TestIsNodeCritical(t *testing.T) {
	p := &corev1.Pod{}
	if IsNodeCritical(p) || IsNodeCritical(nil) {
		t.Error("a pod without a priority class is not node-critical")
	}
	p.Spec.PriorityClassName = "system-node-critical"
	p.UID = types.UID("x")
	if !IsNodeCritical(p) {
		t.Error("system-node-critical is")
	}
}
