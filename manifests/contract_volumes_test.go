package manifests

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
)

// The field contract of volumes (see contract_table_test.go). staticpod mounts hostPath, emptyDir,
// downwardAPI and image volumes, and configMap, secret and projected volumes of the
// documents beside the pod; every other source is refused with its own advice
// (forbidVolumeSource).

var volumeRules = map[string]map[string]rule{
	"Volume": volumeSourceRules(map[string]rule{
		"name":        honoured("containerdrt.TestMountsHostPathInContainer"),
		"hostPath":    honoured("containerdrt.TestMountsHostPathInContainer"),
		"emptyDir":    honoured("containerdrt.TestMountsEmptyDirSharedInContainers"),
		"secret":      honoured("e2e.TestObjectsReachThePod"),
		"configMap":   honoured("e2e.TestObjectsReachThePod"),
		"downwardAPI": honoured("containerdrt.TestMountsDownwardAPIInContainer"),
		"projected":   honoured("containerdrt/poddir.TestVolumeFiles"),
		"image":       honouredNote("containerdrt.TestImageVolumeMountsTheImageReadOnly", "mounted read-only (whatever the mount says), a `subPath` must be a directory of the image; an image that is not a container image (an OCI artifact) is not supported"),
	}),
	"ImageVolumeSource": {
		"reference":  honoured("containerdrt.TestImageVolumeMountsTheImageReadOnly"),
		"pullPolicy": honoured("runner.TestImageVolumePulledWithItsPolicyAndCountedInUse"),
	},
	"HostPathVolumeSource": {
		"path": honoured("containerdrt.TestMountsHostPathInContainer"),
		"type": honoured("containerdrt/poddir.TestHostPathTypes"),
	},
	"EmptyDirVolumeSource": {
		"medium":    honoured("containerdrt/poddir.TestMemoryEmptyDirMountedOnce"),
		"sizeLimit": honouredNote("containerdrt/poddir.TestTmpfsSizeFollowsPodLimit", "the size of a `Memory` volume's tmpfs; on disk it is not enforced (the kubelet evicts the pod)"),
		"mode":      refused(msgAlpha(gateEmptyDirMode)),
	},
	"SecretVolumeSource": {
		"secretName":  honoured("containerdrt/poddir.TestVolumeFiles"),
		"items":       honoured("containerdrt/poddir.TestVolumeFiles"),
		"defaultMode": honoured("containerdrt/poddir.TestVolumeFiles"),
		"optional":    honoured("containerdrt/poddir.TestVolumeFiles"),
		"defaultUser": refused(msgAlpha(gateVolumeUser)),
	},
	"ConfigMapVolumeSource": {
		"name":        honoured("containerdrt/poddir.TestVolumeFiles"),
		"items":       honoured("containerdrt/poddir.TestVolumeFiles"),
		"defaultMode": honoured("containerdrt/poddir.TestVolumeFiles"),
		"optional":    honoured("containerdrt/poddir.TestVolumeFiles"),
		"defaultUser": refused(msgAlpha(gateVolumeUser)),
	},
	"KeyToPath": {
		"key":  honoured("containerdrt/poddir.TestVolumeFiles"),
		"path": honoured("containerdrt/poddir.TestVolumeFiles"),
		"mode": honoured("containerdrt/poddir.TestVolumeFiles"),
		"user": refused(msgAlpha(gateVolumeUser)),
	},
	"DownwardAPIVolumeSource": {
		"items":       honoured("containerdrt/poddir.TestDownwardAPIFiles"),
		"defaultMode": honoured("containerdrt/poddir.TestDownwardAPIFiles"),
		"defaultUser": refused(msgAlpha(gateVolumeUser)),
	},
	"DownwardAPIVolumeFile": {
		"path":             honoured("containerdrt/poddir.TestDownwardAPIFiles"),
		"fieldRef":         honoured("containerdrt/poddir.TestDownwardAPIFiles"),
		"resourceFieldRef": honoured("containerdrt/poddir.TestDownwardAPIFiles"),
		"mode":             honoured("containerdrt/poddir.TestDownwardAPIFiles"),
		"user":             refused(msgAlpha(gateVolumeUser)),
	},
	"ProjectedVolumeSource": {
		"sources":     honoured("containerdrt/poddir.TestVolumeFiles"),
		"defaultMode": honoured("containerdrt/poddir.TestVolumeFiles"),
		"defaultUser": refused(msgAlpha(gateVolumeUser)),
	},
	"VolumeProjection": {
		"secret":              honoured("containerdrt/poddir.TestVolumeFiles"),
		"downwardAPI":         honoured("containerdrt/poddir.TestVolumeFiles"),
		"configMap":           honoured("containerdrt/poddir.TestVolumeFiles"),
		"serviceAccountToken": refused(projectedAdvice["serviceAccountToken"]),
		"clusterTrustBundle":  refused(projectedAdvice["clusterTrustBundle"]),
		"podCertificate":      refused(projectedAdvice["podCertificate"]),
	},
	"SecretProjection": {
		"name":     honoured("containerdrt/poddir.TestVolumeFiles"),
		"items":    honoured("containerdrt/poddir.TestVolumeFiles"),
		"optional": honoured("containerdrt/poddir.TestVolumeFiles"),
	},
	"ConfigMapProjection": {
		"name":     honoured("containerdrt/poddir.TestVolumeFiles"),
		"items":    honoured("containerdrt/poddir.TestVolumeFiles"),
		"optional": honoured("containerdrt/poddir.TestVolumeFiles"),
	},
	"DownwardAPIProjection": {
		"items": honoured("containerdrt/poddir.TestVolumeFiles"),
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
