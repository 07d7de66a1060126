package runner

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/node"
	"github.com/staticpod/staticpod/runner/restrict"
)

// ReasonNodePorts is the kubelet's reason for a pod it rejects because a host port the
// pod asks for is another pod's: the pod is Failed, with a message that says which.
const ReasonNodePorts = "NodePorts"

// Rejection is a wanted pod that may not run: it asks for something its source may
// not have or sets a sysctl it may not (Forbidden), AppArmor confinement the host
// cannot enforce (AppArmor), a node it is not for or more than the node has left
// (Node), or a host port it asks for overlaps one of a pod admitted before it (Port
// and Holder).
type Rejection struct {
	Pod       *corev1.Pod
	Forbidden *restrict.Forbidden // set when Restrictions refuse the pod
	AppArmor  error               // set when the pod asks for AppArmor and the host has none: why
	Node      *node.Refusal       // set when the pod does not fit the node (node.Fits, node.Ledger)
	Port      manifests.HostPort  // the pod's
	Holder    *corev1.Pod         // the pod that has it
}

// Reason is the kubelet's reason for the rejection: Forbidden, SysctlForbidden,
// AppArmor or NodePorts.
func (r Rejection) Reason() string {
	switch {
	case r.Forbidden != nil && r.Forbidden.Reason != "":
		return r.Forbidden.Reason
	case r.Forbidden != nil:
		return restrict.ReasonForbidden
	case r.AppArmor != nil:
		return ReasonAppArmor
	case r.Node != nil:
		return r.Node.Reason
	}
	return ReasonNodePorts
}

// Message says what the pod may not have and why: the flag that forbids it, or which
// port is taken, and by which pod, from where.
func (r Rejection) Message() string {
	switch {
	case r.Forbidden != nil:
		return "Pod was rejected: " + r.Forbidden.Message(r.Pod)
	case r.AppArmor != nil:
		return "Cannot enforce AppArmor: " + r.AppArmor.Error()
	case r.Node != nil:
		return r.Node.Message
	}
	return fmt.Sprintf("Pod was rejected: %s: hostPort %s is taken by pod %s (%s:%s)",
		r.Port.Field, r.Port, manifests.Key(r.Holder), manifests.SourceOf(r.Holder), manifests.LocationOf(r.Holder))
}

// Status is the rejected pod's status, as the kubelet reports a pod it rejected.
func (r Rejection) Status() corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, Reason: r.Reason(), Message: r.Message(), QOSClass: manifests.QOSClass(r.Pod)}
}

// Admit decides which of the desired pods may run: first what each asks for against
// the restrictions of its source, what the host can do and the node's labels and
// taints (decided once: the node's do not change while staticpod runs), then, among
// the others, their requests and host ports (see AdmitHostPorts; a refused pod holds
// no port and requests nothing).
func Admit(desired map[types.UID]*corev1.Pod, rules restrict.Restrictions, host Host, running func(types.UID) bool, leaving []*corev1.Pod) map[types.UID]Rejection {
	rejected := map[types.UID]Rejection{}
	allowed := desired
	for uid, pod := range desired {
		rej := Rejection{Pod: pod, Forbidden: rules.Check(pod)}
		if rej.Forbidden == nil && host.AppArmor != nil && manifests.AppArmorRequired(pod) {
			rej.AppArmor = host.AppArmor
		}
		if rej.Forbidden == nil && rej.AppArmor == nil && host.Node != nil {
			rej.Node = node.Fits(pod, host.Node)
		}
		if rej.Forbidden == nil && rej.AppArmor == nil && rej.Node == nil {
			continue
		}
		if len(rejected) == 0 {
			allowed = make(map[types.UID]*corev1.Pod, len(desired))
			for u, p := range desired {
				allowed[u] = p
			}
		}
		rejected[uid] = rej
		delete(allowed, uid)
	}
	for uid, rej := range admitInOrder(allowed, host.Node, running, leaving) {
		rejected[uid] = rej
	}
	return rejected
}

// AdmitHostPorts decides which of the desired pods may have the host ports they ask
// for, as the kubelet admits pods: one at a time, each refused if a port of it overlaps
// one of a pod admitted before. The pods that run already come first (so a pod never
// loses its ports to a newcomer), then as the config ranks sources, then by location
// and name, so that the second of two files asking for a port is the one refused.
// running says whether a pod runs already; leaving are pods being stopped, which keep
// their ports until they are gone.
func AdmitHostPorts(desired map[types.UID]*corev1.Pod, running func(types.UID) bool, leaving []*corev1.Pod) map[types.UID]Rejection {
	return admitInOrder(desired, nil, running, leaving)
}

// admitInOrder admits the desired pods one at a time in AdmitHostPorts's order, as the
// kubelet does: each is refused if it requests more than n has left once the pods
// admitted before it have theirs (node.Ledger; unchecked without a node), else if a
// host port of it is taken. The pods being stopped keep what they request and their
// ports until they are gone, except from a new instance of themselves.
func admitInOrder(desired map[types.UID]*corev1.Pod, n *corev1.Node, running func(types.UID) bool, leaving []*corev1.Pod) map[types.UID]Rejection {
	var order []*corev1.Pod
	for _, pod := range desired {
		if n != nil || len(manifests.HostPorts(pod)) > 0 {
			order = append(order, pod)
		}
	}
	sortAdmission(order, running)
	rejected := map[types.UID]Rejection{}
	admitted := leaving
	var used *node.Ledger // what the admitted pods request of n
	if n != nil {
		used = node.NewLedger(n)
		for _, p := range leaving {
			used.Add(p)
		}
	}
	for _, pod := range order {
		if used != nil {
			if refusal := withoutPrevious(used, leaving, pod).Check(pod); refusal != nil {
				rejected[pod.UID] = Rejection{Pod: pod, Node: refusal}
				continue
			}
		}
		taken := false
		for _, holder := range admitted {
			if manifests.Key(holder) == manifests.Key(pod) {
				continue // its previous instance, edited: the new one waits for its name anyway
			}
			if port, _, ok := manifests.HostPortConflict(pod, holder); ok {
				rejected[pod.UID] = Rejection{Pod: pod, Port: port, Holder: holder}
				taken = true
				break
			}
		}
		if !taken {
			admitted = append(admitted, pod)
			if used != nil {
				used.Add(pod)
			}
		}
	}
	return rejected
}

// sortAdmission puts pods in the order the kubelet admits them: those that run
// already first, then as the config ranks sources, then by location and name.
func sortAdmission(order []*corev1.Pod, running func(types.UID) bool) {
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if ra, rb := running(a.UID), running(b.UID); ra != rb {
			return ra
		}
		if sa, sb := sourceOrder[manifests.SourceOf(a)], sourceOrder[manifests.SourceOf(b)]; sa != sb {
			return sa < sb
		}
		if la, lb := manifests.LocationOf(a), manifests.LocationOf(b); la != lb {
			return la < lb
		}
		return manifests.Key(a) < manifests.Key(b)
	})
}

// withoutPrevious is used less the requests of pod's previous instance, when it is
// among the pods leaving: an edited pod does not compete with itself.
func withoutPrevious(used *node.Ledger, leaving []*corev1.Pod, pod *corev1.Pod) *node.Ledger {
	for _, p := range leaving {
		if manifests.Key(p) == manifests.Key(pod) {
			used = used.Without(p)
		}
	}
	return used
}
