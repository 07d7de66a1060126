package manifests

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
)

// The field contract of volumes (see contract.go). staticpod mounts hostPath, emptyDir,
// downwardAPI, and configMap, secret and projected volumes of the documents beside the
// pod; every other source is refused with its own advice (forbidVolumeSource).

var volumeRules = map[string]map[string]rule{
	"Volume": volumeSourceRules(map[string]rule{
		"name":        honoured("containerdrt.TestMountsHostPathInContainer"),
		"hostPath":    honoured("containerdrt.TestMountsHostPathInContainer"),
		"emptyDir":    honoured("containerdrt.TestMountsEmptyDirSharedInContainers"),
		"secret":      honoured("e2e.TestObjectsReachThePod"),
		"configMap":   honoured("e2e.TestObjectsReachThePod"),
		"downwardAPI": honoured("containerdrt.TestMountsDownwardAPIInContainer"),
		"projected":   honoured("containerdrt.TestVolumeFiles"),
	}),
	"HostPathVolumeSource": {
		"path": honoured("containerdrt.TestMountsHostPathInContainer"),
		"type": honoured("containerdrt.TestHostPathTypes"),
	},
	"EmptyDirVolumeSource": {
		"medium":    honoured("containerdrt.TestMemoryEmptyDirMountedOnce"),
		"sizeLimit": honouredNote("containerdrt.TestTmpfsSizeFollowsPodLimit", "the size of a `Memory` volume's tmpfs; on disk it is not enforced (the kubelet evicts the pod)"),
		"mode":      refused(msgAlpha(gateEmptyDirMode)),
	},
	"SecretVolumeSource": {
		"secretName":  honoured("containerdrt.TestVolumeFiles"),
		"items":       honoured("containerdrt.TestVolumeFiles"),
		"defaultMode": honoured("containerdrt.TestVolumeFiles"),
		"optional":    honoured("containerdrt.TestVolumeFiles"),
		"defaultUser": refused(msgAlpha(gateVolumeUser)),
	},
	"ConfigMapVolumeSource": {
		"name":        honoured("containerdrt.TestVolumeFiles"),
		"items":       honoured("containerdrt.TestVolumeFiles"),
		"defaultMode": honoured("containerdrt.TestVolumeFiles"),
		"optional":    honoured("containerdrt.TestVolumeFiles"),
		"defaultUser": refused(msgAlpha(gateVolumeUser)),
	},
	"KeyToPath": {
		"key":  honoured("containerdrt.TestVolumeFiles"),
		"path": honoured("containerdrt.TestVolumeFiles"),
		"mode": honoured("containerdrt.TestVolumeFiles"),
		"user": refused(msgAlpha(gateVolumeUser)),
	},
	"DownwardAPIVolumeSource": {
		"items":       honoured("containerdrt.TestDownwardAPIFiles"),
		"defaultMode": honoured("containerdrt.TestDownwardAPIFiles"),
		"defaultUser": refused(msgAlpha(gateVolumeUser)),
	},
	"DownwardAPIVolumeFile": {
		"path":             honoured("containerdrt.TestDownwardAPIFiles"),
		"fieldRef":         honoured("containerdrt.TestDownwardAPIFiles"),
		"resourceFieldRef": honoured("containerdrt.TestDownwardAPIFiles"),
		"mode":             honoured("containerdrt.TestDownwardAPIFiles"),
		"user":             refused(msgAlpha(gateVolumeUser)),
	},
	"ProjectedVolumeSource": {
		"sources":     honoured("containerdrt.TestVolumeFiles"),
		"defaultMode": honoured("containerdrt.TestVolumeFiles"),
		"defaultUser": refused(msgAlpha(gateVolumeUser)),
	},
	"VolumeProjection": {
		"secret":              honoured("containerdrt.TestVolumeFiles"),
		"downwardAPI":         honoured("containerdrt.TestVolumeFiles"),
		"configMap":           honoured("containerdrt.TestVolumeFiles"),
		"serviceAccountToken": refused(projectedAdvice["serviceAccountToken"]),
		"clusterTrustBundle":  refused(projectedAdvice["clusterTrustBundle"]),
		"podCertificate":      refused(projectedAdvice["podCertificate"]),
	},
	"SecretProjection": {
		"name":     honoured("containerdrt.TestVolumeFiles"),
		"items":    honoured("containerdrt.TestVolumeFiles"),
		"optional": honoured("containerdrt.TestVolumeFiles"),
	},
	"ConfigMapProjection": {
		"name":     honoured("containerdrt.TestVolumeFiles"),
		"items":    honoured("containerdrt.TestVolumeFiles"),
		"optional": honoured("containerdrt.TestVolumeFiles"),
	},
	"DownwardAPIProjection": {
		"items": honoured("containerdrt.TestVolumeFiles"),
	},
}

// volumeSourceRules completes the rules of Volume with the refusal of every source
// that mounted lists not: the message each gets from forbidVolumeSource.
func volumeSourceRules(mounted map[string]rule) map[string]rule {
	for _, f := range declaredFields(reflect.TypeFor[corev1.Volume]()) {
		if _, ok := mounted[f.name]; !ok {
			mounted[f.name] = refused(forbidVolumeSource(f.name, nil).Detail)
		}
	}
	return mounted
}
