package manifests

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules of static pods. A static pod has no apiserver behind it: nothing serves a
// service-account token or a resource claim, and no controller
// provisions volumes. A field that needs one is rejected here, with the reason and what
// to use instead, rather than accepted and left to fail when the pod starts, or to be
// silently ignored. ConfigMaps and Secrets are the exception: staticpod serves those
// given as documents beside the pods of the same source (see Objects), where the
// kubelet refuses them in static pods; imagePullSecrets name such Secrets (see
// PullSecrets). So are RuntimeClasses, which runtimeClassName names (see
// RuntimeHandler).

// defaultServiceAccount is the account every pod has; naming it asks for nothing.
const defaultServiceAccount = "default"

const (
	msgServiceAccount = "service-account tokens need an apiserver, which static pods do not have; " +
		"leave serviceAccountName unset (or \"default\") and give the pod the credentials it needs through a hostPath volume instead"
	msgAutomount = "service-account tokens need an apiserver, which static pods do not have; " +
		"remove automountServiceAccountToken (or set it to false) and give the pod the credentials it needs through a hostPath volume instead"
	msgEphemeralContainers = "ephemeral containers are added to a running pod through the apiserver, which static pods do not have; " +
		"use `staticpod exec` to debug a running pod instead"
	msgResourceClaims = "resource claims need an apiserver and a DRA driver, which static pods do not have; " +
		"pass devices in with a hostPath volume instead"
	msgVolumeDevices = "raw block devices come from persistentVolumeClaim or ephemeral volumes, which need an apiserver that static pods do not have; " +
		"mount the device node with a hostPath volume of type BlockDevice instead"
)

// volumeAdvice says why each volume source a static pod cannot use is rejected. Sources
// not listed are volume plugins staticpod does not have (see forbidVolumeSource).
var volumeAdvice = map[string]string{
	"persistentVolumeClaim": "persistentVolumeClaim volumes need an apiserver and a volume controller, which static pods do not have; " +
		"use a hostPath volume on a directory of the host instead",
	"ephemeral": "ephemeral volumes are provisioned through an apiserver by a volume controller, which static pods do not have; " +
		"use an emptyDir volume for scratch space, or a hostPath volume, instead",
	"csi": "csi volumes need a CSI driver registered through an apiserver, which static pods do not have; " +
		"mount the storage on the host and use a hostPath volume instead",
}

// envAdvice says why each environment source a static pod cannot use is rejected.
var envAdvice = map[string]string{
	"fileKeyRef": "env files are not supported by staticpod; use a literal value (env[].value) instead",
}

// validateStatic checks the pod-wide rules of static pods and, for each container, the
// fields that would read from an apiserver.
func validateStatic(spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name := spec.ServiceAccountName; name != "" && name != defaultServiceAccount {
		errs = append(errs, field.Forbidden(fld.Child("serviceAccountName"), msgServiceAccount))
	}
	if name := spec.DeprecatedServiceAccount; name != "" && name != defaultServiceAccount && name != spec.ServiceAccountName {
		errs = append(errs, field.Forbidden(fld.Child("serviceAccount"), msgServiceAccount))
	}
	if spec.AutomountServiceAccountToken != nil && *spec.AutomountServiceAccountToken {
		errs = append(errs, field.Forbidden(fld.Child("automountServiceAccountToken"), msgAutomount))
	}
	if len(spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(fld.Child("ephemeralContainers"), msgEphemeralContainers))
	}
	if len(spec.ResourceClaims) > 0 {
		errs = append(errs, field.Forbidden(fld.Child("resourceClaims"), msgResourceClaims))
	}
	if spec.Resources != nil && len(spec.Resources.Claims) > 0 {
		errs = append(errs, field.Forbidden(fld.Child("resources", "claims"), msgResourceClaims))
	}
	if spec.RuntimeClassName != nil {
		errs = append(errs, invalidMsgs(fld.Child("runtimeClassName"), *spec.RuntimeClassName, validation.IsDNS1123Subdomain(*spec.RuntimeClassName))...)
	}
	for i := range spec.InitContainers {
		errs = append(errs, validateStaticContainer(&spec.InitContainers[i], fld.Child("initContainers").Index(i))...)
	}
	for i := range spec.Containers {
		errs = append(errs, validateStaticContainer(&spec.Containers[i], fld.Child("containers").Index(i))...)
	}
	return errs
}

func validateStaticContainer(c *corev1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range c.VolumeDevices {
		errs = append(errs, field.Forbidden(fld.Child("volumeDevices").Index(i), msgVolumeDevices))
	}
	if len(c.Resources.Claims) > 0 {
		errs = append(errs, field.Forbidden(fld.Child("resources", "claims"), msgResourceClaims))
	}
	return errs
}

// forbidVolumeSource rejects a volume source static pods cannot use.
func forbidVolumeSource(kind string, fld *field.Path) *field.Error {
	if advice, ok := volumeAdvice[kind]; ok {
		return field.Forbidden(fld, advice)
	}
	return field.Forbidden(fld, fmt.Sprintf("%s volumes need a volume plugin, and staticpod mounts only hostPath, emptyDir, downwardAPI, image, configMap, secret and projected volumes; "+
		"mount the storage on the host and use a hostPath volume instead", kind))
}

// forbidEnvSources rejects the sources of env[].valueFrom that static pods cannot use,
// and counts them, so that the caller can still check that exactly one source is set.
func forbidEnvSources(src *corev1.EnvVarSource, fld *field.Path) (int, field.ErrorList) {
	if src.FileKeyRef == nil {
		return 0, nil
	}
	return 1, field.ErrorList{field.Forbidden(fld.Child("fileKeyRef"), envAdvice["fileKeyRef"])}
}
