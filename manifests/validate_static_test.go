package manifests

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// staticCases break one static-pod rule each. Their Forbidden errors must also say why
// and what to use instead (see TestValidateStaticPodExplains).
var staticCases = []validateCase{
	{"persistentVolumeClaim volume", withVolume(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "db"}}),
		[]fieldErr{errAt(tForbidden, "spec.volumes[1].persistentVolumeClaim")}},
	{"projected service-account token", withVolume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
	}}}), []fieldErr{errAt(tForbidden, "spec.volumes[1].projected.sources[0].serviceAccountToken")}},
	{"projected cluster trust bundle", withVolume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "ca.crt", Name: new("roots")}},
	}}}), []fieldErr{errAt(tForbidden, "spec.volumes[1].projected.sources[0].clusterTrustBundle")}},
	{"csi volume", withVolume(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "csi.example.com"}}),
		[]fieldErr{errAt(tForbidden, "spec.volumes[1].csi")}},
	{"ephemeral volume", withVolume(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}),
		[]fieldErr{errAt(tForbidden, "spec.volumes[1].ephemeral")}},
	{"nfs volume", withVolume(corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/export"}}),
		[]fieldErr{errAt(tForbidden, "spec.volumes[1].nfs")}},
	{"fileKeyRef", withEnvSource(corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "data", Path: "env", Key: "K"}}),
		[]fieldErr{errAt(tForbidden, "spec.containers[0].env[0].valueFrom.fileKeyRef")}},
	{"serviceAccountName", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "controller" },
		[]fieldErr{errAt(tForbidden, "spec.serviceAccountName")}},
	{"deprecated serviceAccount", func(p *corev1.Pod) { p.Spec.DeprecatedServiceAccount = "controller" },
		[]fieldErr{errAt(tForbidden, "spec.serviceAccount")}},
	{"automountServiceAccountToken", func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = new(true) },
		[]fieldErr{errAt(tForbidden, "spec.automountServiceAccountToken")}},
	{"ephemeralContainers", func(p *corev1.Pod) {
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	}, []fieldErr{errAt(tForbidden, "spec.ephemeralContainers")}},
	{"resourceClaims", func(p *corev1.Pod) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: new("gpu")}}
		ctr(p).Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	}, []fieldErr{errAt(tForbidden, "spec.resourceClaims"), errAt(tForbidden, "spec.containers[0].resources.claims")}},
	{"runtimeClassName that is no name", func(p *corev1.Pod) { p.Spec.RuntimeClassName = new("Not_A_Name") },
		[]fieldErr{errAt(tInvalid, "spec.runtimeClassName")}},
	{"overhead without runtimeClassName", func(p *corev1.Pod) {
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	},
		[]fieldErr{errAt(tForbidden, "spec.overhead")}},
	{"volumeDevices", func(p *corev1.Pod) {
		ctr(p).VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
	}, []fieldErr{errAt(tForbidden, "spec.containers[0].volumeDevices[0]")}},
}

func withVolume(src corev1.VolumeSource) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "extra", VolumeSource: src})
		ctr(p).VolumeMounts = append(ctr(p).VolumeMounts, corev1.VolumeMount{Name: "extra", MountPath: "/extra"})
	}
}

func withEnvSource(src corev1.EnvVarSource) func(*corev1.Pod) {
	return func(p *corev1.Pod) { ctr(p).Env = []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &src}} }
}

func TestValidateStaticPodRules(t *testing.T) {
	runValidateCases(t, validPod, staticCases)
}

// TestValidateStaticPodExplains checks that each static-pod rule says why the field is
// refused and what to use instead, as DESIGN.md asks.
func TestValidateStaticPodExplains(t *testing.T) {
	for _, tc := range staticCases {
		pod := validPod()
		tc.mutate(pod)
		for _, e := range Validate(pod) {
			if e.Type != field.ErrorTypeForbidden {
				continue
			}
			why := strings.Contains(e.Detail, "apiserver") || strings.Contains(e.Detail, "staticpod")
			if !why || !strings.Contains(e.Detail, "instead") {
				t.Errorf("Validate(%s): %q does not say why and what to use instead", tc.name, e.Error())
			}
		}
	}
}

func TestValidateStaticPodAcceptsDefaults(t *testing.T) {
	runValidateCases(t, validPod, []validateCase{
		{"default service account, no token", func(p *corev1.Pod) {
			p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount = "default", "default"
			p.Spec.AutomountServiceAccountToken = new(false)
		}, nil},
		// Secrets beside the pod serve them; one that is missing is the pull's warning,
		// not the manifest's error (see PullSecrets).
		{"imagePullSecrets", func(p *corev1.Pod) {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}, {Name: ""}}
		}, nil},
	})
}
