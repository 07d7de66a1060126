package runner

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/runner/devices"
	"github.com/staticpod/staticpod/runner/node"
)

// admitDevices gives the pods admitted so far the devices of device plugins they ask
// for, one at a time in the kubelet's order (sortAdmission: the pods that run keep
// theirs), and refuses those that cannot have them with the kubelet's reason. First
// it frees the devices of pods that are gone: neither wanted and admitted, nor held by
// a worker (a pod being stopped keeps its devices until it is gone), nor left in the
// runtime. Before the first relist nothing is freed: a pod of a source not read yet
// may run with devices that the checkpoint keeps for it.
func (l *loop) admitDevices(desired map[types.UID]*corev1.Pod, rejected map[types.UID]Rejection, running func(types.UID) bool) {
	if l.devices == nil {
		return
	}
	if l.pleg.Generation() > 0 {
		l.devices.Release(l.keepsDevices(desired, func(uid types.UID) bool { return rejected[uid].Pod != nil }))
	}
	var order []*corev1.Pod
	for uid, pod := range desired {
		if rejected[uid].Pod == nil && asksDevices(pod) {
			order = append(order, pod)
		}
	}
	sortAdmission(order, running)
	for _, pod := range order {
		// The plugins' calls are bounded (a timeout each); the loop waits on them, as
		// the kubelet's admission does.
		if r := l.devices.Admit(context.Background(), pod); r != nil {
			rejected[pod.UID] = Rejection{Pod: pod, Node: &node.Refusal{Reason: r.Reason, Message: r.Message}}
		}
	}
}

// keepsDevices says which pods keep their devices: those the runtime still holds
// something of, or a worker runs or stops, or that are wanted and not refused.
func (l *loop) keepsDevices(desired map[types.UID]*corev1.Pod, refused func(types.UID) bool) func(types.UID) bool {
	return func(uid types.UID) bool {
		if _, runs := l.runningAs(uid); runs || l.workers[uid] != nil {
			return true
		}
		return desired[uid] != nil && !refused(uid)
	}
}

// releaseDevices frees, after a relist, the devices of pods that are gone (the
// relist no longer shows them), and admits again the pods refused meanwhile.
func (l *loop) releaseDevices(ctx context.Context) {
	if l.devices == nil {
		return
	}
	desired := l.revs.Substitute(l.config.desired)
	if l.devices.Release(l.keepsDevices(desired, func(uid types.UID) bool { return l.rejected[uid] })) {
		l.readmit(ctx)
	}
}

// asksDevices reports whether a container of pod asks for a device plugin's resource.
func asksDevices(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if len(devices.Requests(&cs[i])) > 0 {
				return true
			}
		}
	}
	return false
}
