package manifests

import (
	"path"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	maxFileMode = 0o777
	msgFileMode = "must be a number between 0 and 0777 (octal), both inclusive"
)

var (
	hostPathTypes = []corev1.HostPathType{
		corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory, corev1.HostPathFileOrCreate,
		corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev,
	}
	storageMedia = []corev1.StorageMedium{corev1.StorageMediumDefault, corev1.StorageMediumMemory, corev1.StorageMediumHugePages}

	// The pod fields a downward API file or an environment variable may expose, besides
	// one label or annotation (metadata.labels['key']). Sorted: they are listed in errors.
	volumeFieldPaths = []string{"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"}
	envFieldPaths    = []string{
		"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
		"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
	}
	resourceFieldPaths = []string{
		"limits.cpu", "limits.ephemeral-storage", "limits.memory",
		"requests.cpu", "requests.ephemeral-storage", "requests.memory",
	}
	cpuDivisors    = []string{"1m", "1"}
	memoryDivisors = []string{"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
)

// validateVolumes checks the pod's volumes and returns those a mount may name. A volume
// with an error in its source is still returned, so that its mounts do not each report
// it again as not found.
func validateVolumes(vols []corev1.Volume, fld *field.Path) (map[string]corev1.VolumeSource, field.ErrorList) {
	var errs field.ErrorList
	defined := map[string]corev1.VolumeSource{}
	for i := range vols {
		v, p := &vols[i], fld.Index(i)
		if _, dup := defined[v.Name]; dup && v.Name != "" {
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		} else {
			errs = append(errs, dnsLabel(p.Child("name"), v.Name, true)...)
			defined[v.Name] = v.VolumeSource
		}
		errs = append(errs, validateVolumeSource(&v.VolumeSource, p)...)
	}
	delete(defined, "")
	return defined, errs
}

// validateVolumeSource checks that exactly one source is set and that it is one static
// pods can use: hostPath, emptyDir, downwardAPI, image, and configMap, secret and
// projected volumes of the documents beside the pod.
func validateVolumeSource(src *corev1.VolumeSource, fld *field.Path) field.ErrorList {
	kinds := volumeSources(src)
	if len(kinds) == 0 {
		return field.ErrorList{field.Required(fld, "must specify a volume type")}
	}
	var errs field.ErrorList
	for i, kind := range kinds {
		p := fld.Child(kind)
		if i > 0 {
			errs = append(errs, field.Forbidden(p, "may not specify more than 1 volume type"))
			continue
		}
		switch kind {
		case "hostPath":
			errs = append(errs, validateHostPath(src.HostPath, p)...)
		case "emptyDir":
			errs = append(errs, validateEmptyDir(src.EmptyDir, p)...)
		case "downwardAPI":
			errs = append(errs, validateDownwardAPI(src.DownwardAPI, p)...)
		case "configMap":
			errs = append(errs, validateConfigMapVolume(src.ConfigMap, p)...)
		case "secret":
			errs = append(errs, validateSecretVolume(src.Secret, p)...)
		case "projected":
			errs = append(errs, validateProjected(src.Projected, p)...)
		case "image":
			errs = append(errs, validateImageVolume(src.Image, p)...)
		default:
			errs = append(errs, forbidVolumeSource(kind, p))
		}
	}
	return errs
}

// volumeSources returns the JSON names of the sources set in src, in the order the API
// declares them. Every source is a pointer field; walking them by reflection means that
// a source added to the API later is reported (as unsupported) rather than ignored.
func volumeSources(src *corev1.VolumeSource) []string {
	var kinds []string
	v := reflect.ValueOf(src).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			kinds = append(kinds, name)
		}
	}
	return kinds
}

func validateHostPath(hp *corev1.HostPathVolumeSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch p := fld.Child("path"); {
	case hp.Path == "":
		errs = append(errs, field.Required(p, ""))
	case !path.IsAbs(hp.Path):
		errs = append(errs, field.Invalid(p, hp.Path, "must be an absolute path"))
	default:
		errs = append(errs, noBacksteps(p, hp.Path)...)
	}
	if hp.Type != nil {
		errs = append(errs, enum(fld.Child("type"), *hp.Type, hostPathTypes)...)
	}
	return errs
}

// validateImageVolume checks an image volume as the apiserver's
// validateImageVolumeSource does: a reference is required, without surrounding
// whitespace, and the pull policy (defaulted as a container's) is a known one.
func validateImageVolume(src *corev1.ImageVolumeSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch ref := fld.Child("reference"); {
	case src.Reference == "":
		errs = append(errs, field.Required(ref, ""))
	case strings.TrimSpace(src.Reference) != src.Reference:
		errs = append(errs, field.Invalid(ref, src.Reference, "must not have leading or trailing whitespace"))
	}
	return append(errs, requiredEnum(fld.Child("pullPolicy"), src.PullPolicy, pullPolicies)...)
}

func validateEmptyDir(ed *corev1.EmptyDirVolumeSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !strings.HasPrefix(string(ed.Medium), string(corev1.StorageMediumHugePagesPrefix)) {
		errs = append(errs, enum(fld.Child("medium"), ed.Medium, storageMedia)...)
	}
	if ed.SizeLimit != nil && ed.SizeLimit.Sign() < 0 {
		errs = append(errs, field.Invalid(fld.Child("sizeLimit"), ed.SizeLimit.String(), msgNegative))
	}
	return errs
}

func validateDownwardAPI(d *corev1.DownwardAPIVolumeSource, fld *field.Path) field.ErrorList {
	errs := fileMode(fld.Child("defaultMode"), d.DefaultMode)
	paths := map[string]bool{}
	for i, item := range d.Items {
		p := fld.Child("items").Index(i)
		errs = append(errs, validateDownwardAPIFile(item, p)...)
		if item.Path != "" {
			errs = append(errs, uniqueName(paths, item.Path, p.Child("path"))...)
		}
	}
	return errs
}

func validateDownwardAPIFile(item corev1.DownwardAPIVolumeFile, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if item.Path == "" {
		errs = append(errs, field.Required(fld.Child("path"), ""))
	} else {
		errs = append(errs, relativePath(fld.Child("path"), item.Path)...)
		if strings.HasPrefix(item.Path, "..") && !strings.HasPrefix(item.Path, "../") {
			errs = append(errs, field.Invalid(fld.Child("path"), item.Path, "must not start with '..'"))
		}
	}
	switch {
	case item.FieldRef != nil && item.ResourceFieldRef != nil:
		errs = append(errs, field.Invalid(fld, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
	case item.FieldRef != nil:
		errs = append(errs, validateFieldRef(item.FieldRef, volumeFieldPaths, fld.Child("fieldRef"))...)
	case item.ResourceFieldRef != nil:
		errs = append(errs, validateResourceFieldRef(item.ResourceFieldRef, true, fld.Child("resourceFieldRef"))...)
	default:
		errs = append(errs, field.Required(fld, "one of fieldRef and resourceFieldRef is required"))
	}
	return append(errs, fileMode(fld.Child("mode"), item.Mode)...)
}

// validateFieldRef checks a reference to a field of the pod itself, for an environment
// variable or a downward API file; allowed lists the paths the caller accepts.
func validateFieldRef(ref *corev1.ObjectFieldSelector, allowed []string, fld *field.Path) field.ErrorList {
	p := fld.Child("fieldPath")
	switch {
	case ref.APIVersion == "":
		return field.ErrorList{field.Required(fld.Child("apiVersion"), "")}
	case ref.APIVersion != "v1":
		return field.ErrorList{field.NotSupported(fld.Child("apiVersion"), ref.APIVersion, []string{"v1"})}
	case ref.FieldPath == "":
		return field.ErrorList{field.Required(p, "")}
	}
	base, key, subscripted := splitSubscript(ref.FieldPath)
	switch {
	case !subscripted && !slices.Contains(allowed, base):
		return field.ErrorList{field.NotSupported(p, base, allowed)}
	case !subscripted:
		return nil
	case base == "metadata.labels":
		return invalidMsgs(p, key, content.IsLabelKey(key))
	case base == "metadata.annotations":
		return invalidMsgs(p, key, content.IsLabelKey(strings.ToLower(key)))
	}
	return field.ErrorList{field.Invalid(p, base, "does not support subscript")}
}

// splitSubscript splits "metadata.labels['app']" into "metadata.labels" and "app".
func splitSubscript(fieldPath string) (base, key string, ok bool) {
	inner, ok := strings.CutSuffix(fieldPath, "']")
	if !ok {
		return fieldPath, "", false
	}
	base, key, ok = strings.Cut(inner, "['")
	if !ok || base == "" {
		return fieldPath, "", false
	}
	return base, key, true
}

// validateResourceFieldRef checks a reference to a container's requests or limits. A
// downward API file must name the container; an environment variable defaults to its own.
func validateResourceFieldRef(ref *corev1.ResourceFieldSelector, inVolume bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case inVolume && ref.ContainerName == "":
		errs = append(errs, field.Required(fld.Child("containerName"), ""))
	case ref.Resource == "":
		errs = append(errs, field.Required(fld.Child("resource"), ""))
	case !slices.Contains(resourceFieldPaths, ref.Resource) && !hugePagesField(ref.Resource):
		errs = append(errs, field.NotSupported(fld.Child("resource"), ref.Resource, resourceFieldPaths))
	}
	return append(errs, validateDivisor(ref.Resource, ref.Divisor, fld.Child("divisor"))...)
}

func hugePagesField(res string) bool {
	return strings.HasPrefix(res, "limits."+hugePagesPrefix) || strings.HasPrefix(res, "requests."+hugePagesPrefix)
}

// validateDivisor checks the unit a resource is exposed in: 1 or 1m for cpu, a power of
// 10 or 2 for byte quantities.
func validateDivisor(res string, divisor resource.Quantity, fld *field.Path) field.ErrorList {
	if divisor.IsZero() {
		return nil
	}
	_, name, _ := strings.Cut(res, ".")
	switch d := divisor.String(); {
	case name == "cpu" && !slices.Contains(cpuDivisors, d):
		return field.ErrorList{field.Invalid(fld, res, "only divisor's values 1m and 1 are supported with the cpu resource")}
	case name != "cpu" && !slices.Contains(memoryDivisors, d):
		return field.ErrorList{field.Invalid(fld, res, "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the "+name+" resource")}
	}
	return nil
}

func fileMode(fld *field.Path, mode *int32) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > maxFileMode) {
		return field.ErrorList{field.Invalid(fld, *mode, msgFileMode)}
	}
	return nil
}

// relativePath checks a path that must stay inside a directory: relative, and with no
// '..' element.
func relativePath(fld *field.Path, p string) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(p) {
		errs = append(errs, field.Invalid(fld, p, "must be a relative path"))
	}
	return append(errs, noBacksteps(fld, p)...)
}

func noBacksteps(fld *field.Path, p string) field.ErrorList {
	if slices.Contains(strings.Split(p, "/"), "..") {
		return field.ErrorList{field.Invalid(fld, p, "must not contain '..'")}
	}
	return nil
}
