package manifests

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A pod with hostUsers: false runs in a user namespace of its own, whose IDs 0..65535
// are 65536 IDs of the host's above 65535. Its volumes are bind mounts of host files,
// seen through that mapping: staticpod owns the files it writes itself (emptyDir,
// configMap, secret, projected and downwardAPI volumes, the /etc files, the termination
// message) with the pod's IDs. A hostPath or an image it does not own could be seen
// with the pod's IDs only through idmapped mounts (runc 1.2 and containerd 2.0 or
// later), which staticpod does not use: such volumes are refused, as the kubelet's
// runtime refuses what it cannot map rather than show the pod files it may not use.

const msgUserNSVolume = "a pod with hostUsers: false sees its volumes through its user namespace, and staticpod maps only the volumes whose files it writes itself " +
	"(emptyDir, configMap, secret, projected, downwardAPI); showing this volume's files with the pod's IDs needs idmapped mounts (runc 1.2 and containerd 2.0 or later), which staticpod does not use; " +
	"remove the volume, or set hostUsers to true, instead"

// validateUserNamespace refuses the volumes a pod with hostUsers: false cannot mount.
// Volume sources refused for every pod are not named again.
func validateUserNamespace(spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	if hostUsers(spec) {
		return nil
	}
	var errs field.ErrorList
	for i := range spec.Volumes {
		src, p := &spec.Volumes[i].VolumeSource, fld.Child("volumes").Index(i)
		switch {
		case src.HostPath != nil:
			errs = append(errs, field.Forbidden(p.Child("hostPath"), msgUserNSVolume))
		case src.Image != nil:
			errs = append(errs, field.Forbidden(p.Child("image"), msgUserNSVolume))
		}
	}
	return errs
}
