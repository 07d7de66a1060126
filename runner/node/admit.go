package node

import (
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/staticpod/staticpod/manifests"
)

// The kubelet's reasons and messages for the pods it refuses at admission
// (pkg/kubelet/lifecycle/predicate.go and the scheduler plugins it runs): the
// reason is the predicate's name, the message "Predicate <name> failed: <why>".
const (
	ReasonNodeAffinity    = "NodeAffinity"
	ReasonTaintToleration = "TaintToleration"
	ReasonOutOfCPU        = "OutOfcpu"
	ReasonOutOfMemory     = "OutOfmemory"

	whyNodeAffinity = "node(s) didn't match Pod's node affinity/selector"
	whyTaint        = "node(s) had taints that the pod didn't tolerate"
)

// criticalPriorityClasses are the priority classes whose pods the kubelet admits
// whatever they request (their priority is 2000000000 or more: IsCriticalPod).
var criticalPriorityClasses = []string{"system-node-critical", "system-cluster-critical"}

// Refusal is why a pod may not run on the node, in the kubelet's words.
type Refusal struct {
	Reason  string
	Message string
}

// Fits reports why pod may not run on n, nil when it may: its nodeSelector and its
// required node affinity (every term's matchExpressions against the labels,
// matchFields against metadata.name) must match the node, and it must tolerate each
// NoExecute taint of the node. Both are matched by the helpers the kubelet and the
// scheduler use (k8s.io/component-helpers, k8s.io/api's ToleratesTaint).
//
// The kubelet exempts static pods from the taint check, and every pod is a static pod
// here: staticpod checks taints all the same, or a taint would mean nothing. File pods
// tolerate every NoExecute taint anyway (manifests.Identify gives them the kubelet's
// toleration), so a taint keeps out the pods of the URL and of the API that do not
// tolerate it.
func Fits(pod *corev1.Pod, n *corev1.Node) *Refusal {
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(n); !ok {
		return predicateFailed(ReasonNodeAffinity, whyNodeAffinity)
	}
	if _, untolerated := UntoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations); untolerated {
		return predicateFailed(ReasonTaintToleration, whyTaint)
	}
	return nil
}

// UntoleratedTaint returns the first NoExecute taint that no toleration tolerates.
func UntoleratedTaint(taints []corev1.Taint, tolerations []corev1.Toleration) (corev1.Taint, bool) {
	for _, taint := range taints {
		if taint.Effect != corev1.TaintEffectNoExecute {
			continue // the kubelet looks at NoExecute taints only; the others are a scheduler's
		}
		tolerated := false
		for i := range tolerations {
			if tolerations[i].ToleratesTaint(logr.Discard(), &taint, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return taint, true
		}
	}
	return corev1.Taint{}, false
}

func predicateFailed(name, why string) *Refusal {
	return &Refusal{Reason: name, Message: fmt.Sprintf("Predicate %s failed: %s", name, why)}
}

// Critical reports whether the kubelet admits pod whatever it requests: its priority
// class is system-node-critical or system-cluster-critical. (The kubelet takes every
// static pod for critical; here, where every pod is one, only these are.)
func Critical(pod *corev1.Pod) bool {
	for _, c := range criticalPriorityClasses {
		if pod.Spec.PriorityClassName == c {
			return true
		}
	}
	return false
}

// Ledger counts what the admitted pods request of the node's allocatable CPU and
// memory, as the kubelet's admission does (its NodeInfo of the active pods).
type Ledger struct {
	allocatable corev1.ResourceList
	milliCPU    int64 // requested by the pods added
	memory      int64
}

// NewLedger returns an empty ledger of n's allocatable resources.
func NewLedger(n *corev1.Node) *Ledger { return &Ledger{allocatable: n.Status.Allocatable} }

// Add counts the requests of an admitted pod.
func (l *Ledger) Add(pod *corev1.Pod) {
	cpu, mem := requests(pod)
	l.milliCPU += cpu
	l.memory += mem
}

// Without is a copy of the ledger less the requests of pod, added before.
func (l *Ledger) Without(pod *corev1.Pod) *Ledger {
	cpu, mem := requests(pod)
	return &Ledger{allocatable: l.allocatable, milliCPU: l.milliCPU - cpu, memory: l.memory - mem}
}

// Check reports why pod does not fit what is left of the node, nil when it does (or
// when it is critical, which the kubelet admits anyway, preempting other pods where it
// can; staticpod preempts nothing). A resource the pod does not request, or that the
// node's allocatable does not name (validate knows no device's capacity), never
// refuses it; CPU is checked before memory, and the first that does not fit is the
// reason.
func (l *Ledger) Check(pod *corev1.Pod) *Refusal {
	if Critical(pod) {
		return nil
	}
	cpu, mem := requests(pod)
	if alloc, known := l.allocatable[corev1.ResourceCPU]; known && cpu > 0 && cpu > alloc.MilliValue()-l.milliCPU {
		return insufficient(ReasonOutOfCPU, corev1.ResourceCPU, cpu, l.milliCPU, alloc.MilliValue())
	}
	if alloc, known := l.allocatable[corev1.ResourceMemory]; known && mem > 0 && mem > alloc.Value()-l.memory {
		return insufficient(ReasonOutOfMemory, corev1.ResourceMemory, mem, l.memory, alloc.Value())
	}
	return nil
}

// requests are the pod's CPU (millicores) and memory (bytes) requests as a whole, as
// the kubelet counts them (manifests.PodRequests).
func requests(pod *corev1.Pod) (milliCPU, memory int64) {
	r := manifests.PodRequests(pod)
	return r.Cpu().MilliValue(), r.Memory().Value()
}

// insufficient is the kubelet's InsufficientResourceError as a refusal.
func insufficient(reason string, name corev1.ResourceName, requested, used, capacity int64) *Refusal {
	return &Refusal{Reason: reason, Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
		name, requested, used, capacity)}
}
