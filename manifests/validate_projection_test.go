package manifests

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestValidateObjectReferences checks the shape of the fields that read ConfigMaps and
// Secrets: valid ones are accepted (whether the objects exist is References' question),
// broken ones are refused at their field.
func TestValidateObjectReferences(t *testing.T) {
	cmVol := func(items ...corev1.KeyToPath) corev1.VolumeSource {
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Items: items}}
	}
	runValidateCases(t, validPod, []validateCase{
		{"configMap volume", withVolume(cmVol()), nil},
		{"configMap volume with items and modes", withVolume(cmVol(corev1.KeyToPath{Key: "app.conf", Path: "conf/app.conf", Mode: new(int32(0o600))})), nil},
		{"secret volume", withVolume(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", DefaultMode: new(int32(0o400))}}), nil},
		{"projected volume", withVolume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}, Items: []corev1.KeyToPath{{Key: "tls.key", Path: "key"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}}}}},
		}}}), nil},
		{"configMap volume without a name", withVolume(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}),
			[]fieldErr{errAt(tRequired, "spec.volumes[1].configMap.name")}},
		{"secret volume without a name", withVolume(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}),
			[]fieldErr{errAt(tRequired, "spec.volumes[1].secret.secretName")}},
		{"item leaving the volume", withVolume(cmVol(corev1.KeyToPath{Key: "k", Path: "../k"})),
			[]fieldErr{errAt(tInvalid, "spec.volumes[1].configMap.items[0].path")}},
		{"item with a bad key and mode", withVolume(cmVol(corev1.KeyToPath{Key: "a/b", Path: "k", Mode: new(int32(0o1000))})),
			[]fieldErr{errAt(tInvalid, "spec.volumes[1].configMap.items[0].key"), errAt(tInvalid, "spec.volumes[1].configMap.items[0].mode")}},
		{"item hiding ..data", withVolume(cmVol(corev1.KeyToPath{Key: "k", Path: "..data"})),
			[]fieldErr{errAt(tInvalid, "spec.volumes[1].configMap.items[0].path")}},
		{"path given twice across projections", withVolume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}, Items: []corev1.KeyToPath{{Key: "k", Path: "f"}}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "b"}, Items: []corev1.KeyToPath{{Key: "k", Path: "f"}}}},
		}}}), []fieldErr{errAt(tDuplicate, "spec.volumes[1].projected.sources[1].secret.items[0].path")}},
		{"envFrom", func(p *corev1.Pod) {
			ctr(p).EnvFrom = []corev1.EnvFromSource{{Prefix: "APP_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}
		}, nil},
		{"envFrom naming nothing", func(p *corev1.Pod) { ctr(p).EnvFrom = []corev1.EnvFromSource{{}} },
			[]fieldErr{errAt(tInvalid, "spec.containers[0].envFrom[0]")}},
		{"envFrom without a name", func(p *corev1.Pod) {
			ctr(p).EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{}}}
		}, []fieldErr{errAt(tRequired, "spec.containers[0].envFrom[0].secretRef.name")}},
		{"configMapKeyRef", withEnvSource(corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "k"}}), nil},
		{"secretKeyRef without a key", withEnvSource(corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}),
			[]fieldErr{errAt(tRequired, "spec.containers[0].env[0].valueFrom.secretKeyRef.key")}},
	})
}
