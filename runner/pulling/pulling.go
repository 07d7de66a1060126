// Package pulling shows in a pod's status how far the pulls of its images are: the
// containers that wait for an image being pulled wait with the reason ContainerCreating
// (what the kubelet shows while it pulls) and a message with the bytes fetched of the
// image's total (wire.PullProgress.Message). The kubelet has no such field; kubectl
// describe shows the message under the container's state. The runner calls it from the
// goroutine that measures a pull, on the status it last published. It imports only
// api/wire of staticpod's.
package pulling

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/wire"
)

// ReasonContainerCreating is the waiting reason of a container whose image is pulled,
// the kubelet's (runner.ReasonContainerCreating).
const ReasonContainerCreating = "ContainerCreating"

// Show returns a copy of pod whose containers that wait for image (the container named
// container, and any other not running with that image) wait with p's progress. A
// running or finished container is left as it is: it does not wait for the pull.
func Show(pod *corev1.Pod, container, image string, p wire.PullProgress) *corev1.Pod {
	out := pod.DeepCopy()
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating, Message: p.Message(image)}}
	for _, sts := range [][]corev1.ContainerStatus{out.Status.InitContainerStatuses, out.Status.ContainerStatuses} {
		for i := range sts {
			st := &sts[i]
			if st.State.Running != nil || st.Name != container && (st.Image != image || st.State.Terminated != nil) {
				continue
			}
			st.State = waiting
		}
	}
	return out
}
