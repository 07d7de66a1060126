package runner

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// Image volumes (volumes[].image) are pulled as the kubelet pulls them (kuberuntime's
// getImageVolumes): with the volume's pull policy and the pod's pull secrets, once per
// sync that starts a container, before the containers' own images. A container that
// mounts one whose image could not be made present does not start: it waits with the
// pull's reason (ErrImagePull, ErrImageNeverPull, ImagePullBackOff), and an event says
// so; the pod's other containers start. The runtime mounts each image read-only
// (CreateRequest.ImageVolumes).

// imageVolumePulls are what one sync made of the pod's image volumes, by volume name.
type imageVolumePulls map[string]imageVolumePull

// imageVolumePull is the image of one image volume, or why it is not there.
type imageVolumePull struct {
	img     Image
	waiting *corev1.ContainerStateWaiting // nil when img is present
}

// pullVolumes makes present the images of the image volumes c mounts, each once per
// sync (pulls), and returns them by volume name. When one failed, c waits with the
// failure's reason, an event tells of each failed volume, and it reports false.
func (w *worker) pullVolumes(ctx context.Context, pod *corev1.Pod, c *corev1.Container, pulls imageVolumePulls) (map[string]Image, bool) {
	var imgs map[string]Image
	var waiting *corev1.ContainerStateWaiting
	for _, vm := range c.VolumeMounts {
		src := imageVolume(pod, vm.Name)
		if src == nil {
			continue
		}
		p, done := pulls[vm.Name]
		if !done {
			p.img, p.waiting = w.ensureImage(ctx, pod, "", src.Reference, src.PullPolicy)
			pulls[vm.Name] = p
		}
		if p.waiting != nil {
			w.warn(c.Name, "Failed", "Error: "+p.waiting.Message)
			waiting = p.waiting
			continue
		}
		if imgs == nil {
			imgs = map[string]Image{}
		}
		imgs[vm.Name] = p.img
	}
	if waiting != nil {
		w.obs.Waiting[c.Name] = *waiting
		return nil, false
	}
	return imgs, true
}

// imageVolume is the source of the pod's volume called name if it is an image volume,
// else nil.
func imageVolume(pod *corev1.Pod, name string) *corev1.ImageVolumeSource {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return pod.Spec.Volumes[i].Image
		}
	}
	return nil
}
