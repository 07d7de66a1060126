package manifests

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Volumes that project the keys of ConfigMaps and Secrets (documents of the pod's own
// source: see Objects) into files, alone or, in a projected volume, together with
// downward API files. The rules are the apiserver's; whether the objects and keys exist
// is checked against a source's objects by References.

// projectedAdvice says why the sources of a projected volume that need an apiserver are
// rejected.
var projectedAdvice = map[string]string{
	"serviceAccountToken": "service-account tokens need an apiserver, which static pods do not have; " +
		"give the pod the credentials it needs through a Secret document beside the pod instead",
	"clusterTrustBundle": "cluster trust bundles are read from an apiserver, which static pods do not have; " +
		"put the certificates in a ConfigMap document beside the pod instead",
	"podCertificate": "pod certificates are issued through an apiserver, which static pods do not have; " +
		"put the certificate and key in a Secret document beside the pod instead",
}

func validateConfigMapVolume(src *corev1.ConfigMapVolumeSource, fld *field.Path) field.ErrorList {
	errs := objectName(fld.Child("name"), src.Name)
	errs = append(errs, fileMode(fld.Child("defaultMode"), src.DefaultMode)...)
	return append(errs, validateKeyToPaths(src.Items, fld.Child("items"), map[string]bool{})...)
}

func validateSecretVolume(src *corev1.SecretVolumeSource, fld *field.Path) field.ErrorList {
	errs := objectName(fld.Child("secretName"), src.SecretName)
	errs = append(errs, fileMode(fld.Child("defaultMode"), src.DefaultMode)...)
	return append(errs, validateKeyToPaths(src.Items, fld.Child("items"), map[string]bool{})...)
}

// validateProjected checks a projected volume: each source one of configMap, secret and
// downwardAPI, and no file path given twice across them.
func validateProjected(src *corev1.ProjectedVolumeSource, fld *field.Path) field.ErrorList {
	errs := fileMode(fld.Child("defaultMode"), src.DefaultMode)
	paths := map[string]bool{}
	for i, s := range src.Sources {
		p := fld.Child("sources").Index(i)
		kinds := projectionKinds(s)
		if len(kinds) == 0 {
			errs = append(errs, field.Required(p, "must specify exactly one of configMap, secret and downwardAPI"))
		}
		for j, kind := range kinds {
			if j > 0 {
				errs = append(errs, field.Forbidden(p.Child(kind), "may not specify more than 1 volume projection"))
				continue
			}
			if advice, ok := projectedAdvice[kind]; ok {
				errs = append(errs, field.Forbidden(p.Child(kind), advice))
			}
		}
		switch {
		case s.ConfigMap != nil:
			q := p.Child("configMap")
			errs = append(errs, objectName(q.Child("name"), s.ConfigMap.Name)...)
			errs = append(errs, validateKeyToPaths(s.ConfigMap.Items, q.Child("items"), paths)...)
		case s.Secret != nil:
			q := p.Child("secret")
			errs = append(errs, objectName(q.Child("name"), s.Secret.Name)...)
			errs = append(errs, validateKeyToPaths(s.Secret.Items, q.Child("items"), paths)...)
		case s.DownwardAPI != nil:
			q := p.Child("downwardAPI")
			for k, item := range s.DownwardAPI.Items {
				r := q.Child("items").Index(k)
				errs = append(errs, validateDownwardAPIFile(item, r)...)
				if item.Path != "" {
					errs = append(errs, uniqueName(paths, item.Path, r.Child("path"))...)
				}
			}
		}
	}
	return errs
}

// projectionKinds returns the JSON names of the sources set in one projection.
func projectionKinds(s corev1.VolumeProjection) []string {
	var kinds []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{"secret", s.Secret != nil},
		{"downwardAPI", s.DownwardAPI != nil},
		{"configMap", s.ConfigMap != nil},
		{"serviceAccountToken", s.ServiceAccountToken != nil},
		{"clusterTrustBundle", s.ClusterTrustBundle != nil},
		{"podCertificate", s.PodCertificate != nil},
	} {
		if k.set {
			kinds = append(kinds, k.name)
		}
	}
	return kinds
}

// validateKeyToPaths checks the items of a configMap or secret projection: a valid key,
// a relative path within the volume given once (paths holds those already given in the
// volume), and a file mode.
func validateKeyToPaths(items []corev1.KeyToPath, fld *field.Path, paths map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for i, item := range items {
		p := fld.Index(i)
		if item.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), ""))
		} else {
			errs = append(errs, invalidMsgs(p.Child("key"), item.Key, validation.IsConfigMapKey(item.Key))...)
		}
		if item.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		} else {
			errs = append(errs, relativePath(p.Child("path"), item.Path)...)
			if strings.HasPrefix(item.Path, "..") && !strings.HasPrefix(item.Path, "../") {
				errs = append(errs, field.Invalid(p.Child("path"), item.Path, "must not start with '..'"))
			}
			errs = append(errs, uniqueName(paths, item.Path, p.Child("path"))...)
		}
		errs = append(errs, fileMode(p.Child("mode"), item.Mode)...)
	}
	return errs
}

// objectName checks the name of a ConfigMap or Secret a pod refers to.
func objectName(fld *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	return invalidMsgs(fld, name, validation.IsDNS1123Subdomain(name))
}

// validateKeyRef checks an env[].valueFrom reference to a key of a ConfigMap or Secret.
func validateKeyRef(name, key string, fld *field.Path) field.ErrorList {
	errs := objectName(fld.Child("name"), name)
	if key == "" {
		return append(errs, field.Required(fld.Child("key"), ""))
	}
	return append(errs, invalidMsgs(fld.Child("key"), key, validation.IsConfigMapKey(key))...)
}

// validateEnvFrom checks envFrom: each entry names one ConfigMap or Secret, and a prefix
// that makes valid variable names.
func validateEnvFrom(envFrom []corev1.EnvFromSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range envFrom {
		p := fld.Index(i)
		if e.Prefix != "" {
			errs = append(errs, invalidMsgs(p.Child("prefix"), e.Prefix, validation.IsRelaxedEnvVarName(e.Prefix))...)
		}
		switch {
		case e.ConfigMapRef != nil && e.SecretRef != nil:
			errs = append(errs, field.Invalid(p, "", "may not have more than one field specified at a time"))
		case e.ConfigMapRef != nil:
			errs = append(errs, objectName(p.Child("configMapRef", "name"), e.ConfigMapRef.Name)...)
		case e.SecretRef != nil:
			errs = append(errs, objectName(p.Child("secretRef", "name"), e.SecretRef.Name)...)
		default:
			errs = append(errs, field.Invalid(p, "", "must specify one of: `configMapRef` or `secretRef`"))
		}
	}
	return errs
}
