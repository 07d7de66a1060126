package runner

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/events"
)

// portPod is sourcePod with a container asking for host port hostPort/protocol on ip.
func portPod(uid, name, source string, hostPort int32, protocol corev1.Protocol, ip string) *corev1.Pod {
	p := sourcePod(uid, name, source)
	p.Spec.Containers = []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: hostPort, Protocol: protocol, HostIP: ip}}}}
	return p
}

func TestAdmitHostPorts(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		running []string
		leaving []*corev1.Pod
		want    map[string]string // rejected uid -> the holder's uid
	}{
		{"no conflict", []*corev1.Pod{portPod("a", "a", "file", 80, tcp, ""), portPod("b", "b", "file", 81, tcp, ""), portPod("c", "c", "file", 80, udp, "")}, nil, nil, map[string]string{}},
		{"the later file loses", []*corev1.Pod{portPod("b", "b", "file", 80, tcp, ""), portPod("a", "a", "file", 80, tcp, "")}, nil, nil, map[string]string{"b": "a"}},
		{"the later source loses", []*corev1.Pod{portPod("a", "a", "api", 80, tcp, ""), portPod("b", "b", "file", 80, tcp, "")}, nil, nil, map[string]string{"a": "b"}},
		{"a running pod keeps its port", []*corev1.Pod{portPod("a", "a", "file", 80, tcp, ""), portPod("b", "b", "file", 80, tcp, "")}, []string{"b"}, nil, map[string]string{"a": "b"}},
		{"every address against one", []*corev1.Pod{portPod("a", "a", "file", 80, tcp, "127.0.0.1"), portPod("b", "b", "file", 80, tcp, "")}, nil, nil, map[string]string{"b": "a"}},
		{"two addresses", []*corev1.Pod{portPod("a", "a", "file", 80, tcp, "127.0.0.1"), portPod("b", "b", "file", 80, tcp, "192.0.2.2")}, nil, nil, map[string]string{}},
		{"a pod being stopped keeps its port", []*corev1.Pod{portPod("b", "b", "file", 80, tcp, "")}, nil, []*corev1.Pod{portPod("a1", "a", "file", 80, tcp, "")}, map[string]string{"b": "a1"}},
		{"an edited pod against its previous instance", []*corev1.Pod{portPod("a2", "a", "file", 80, tcp, "")}, nil, []*corev1.Pod{portPod("a1", "a", "file", 80, tcp, "")}, map[string]string{}},
		{"three ask, one wins", []*corev1.Pod{portPod("a", "a", "file", 80, tcp, ""), portPod("b", "b", "file", 80, tcp, ""), portPod("c", "c", "file", 80, tcp, "")}, nil, nil, map[string]string{"b": "a", "c": "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := map[types.UID]*corev1.Pod{}
			for _, p := range tt.pods {
				desired[p.UID] = p
			}
			got := map[string]string{}
			for uid, rej := range AdmitHostPorts(desired, func(uid types.UID) bool { return slices.Contains(tt.running, string(uid)) }, tt.leaving) {
				got[string(uid)] = string(rej.Holder.UID)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rejected -> holder (-want +got):\n%s", diff)
			}
		})
	}
}

// A pod whose host port another pod has is refused: it is reported Failed with the
// kubelet's reason, a message naming the port and the pod that has it, and an event;
// it runs once the other pod goes.
func TestHostPortTakenIsRefused(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	first := testPod(t, "first", "httpd", corev1.RestartPolicyAlways)
	second := testPod(t, "second", "httpd", corev1.RestartPolicyAlways)
	for _, p := range []*corev1.Pod{first, second} {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
	}
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		t.Fatal(err)
	}
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{first, second}})
	if len(spawned) != 1 || spawned[0].uid != first.UID {
		t.Fatalf("workers %d, want one, for the first pod", len(spawned))
	}
	var st corev1.PodStatus
	for _, p := range h.r.Pods() {
		if p.UID == second.UID {
			st = p.Status
		}
	}
	if st.Phase != corev1.PodFailed || st.Reason != ReasonNodePorts ||
		!strings.Contains(st.Message, "spec.containers[0].ports[0].hostPort: hostPort TCP 0.0.0.0:8080 is taken by pod default/first-n (file:first.yaml)") {
		t.Errorf("status of the refused pod: %s %q %q", st.Phase, st.Reason, st.Message)
	}
	if evs := h.r.events.Pod(second.UID); len(evs) != 1 || evs[0].Reason != ReasonNodePorts || evs[0].Type != events.Warning {
		t.Errorf("events of the refused pod: %+v", evs)
	}

	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{first, second}}) // a rescan
	if len(spawned) != 1 {
		t.Fatalf("a rescan started %d workers, want still one", len(spawned))
	}
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{second}}) // the first pod's file is removed
	if len(spawned) != 1 {
		t.Fatalf("%d workers while the first pod stops, want its only: it has the port until it is gone", len(spawned))
	}
	for i := 0; i < 3 && !h.sync(spawned[0]); i++ {
	}
	l.workerGone(h.ctx, first.UID)
	if len(spawned) != 2 || spawned[1].uid != second.UID {
		t.Fatalf("after the first pod went: %d workers, want the second pod's", len(spawned))
	}
	for _, p := range h.r.Pods() {
		if p.UID == second.UID {
			t.Errorf("the admitted pod still shows its refusal until its worker publishes: %s %s", p.Status.Phase, p.Status.Reason)
		}
	}
}
