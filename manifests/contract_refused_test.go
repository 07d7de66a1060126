package manifests

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// refusalBases put into a valid pod a value of each type that has refused fields, and
// return it with its field path, for TestFieldContractRefusalsReachUsers to set the
// refused field on.
var refusalBases = map[string]func(*corev1.Pod) (reflect.Value, *field.Path){
	"PodSpec": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		return reflect.ValueOf(&p.Spec), field.NewPath("spec")
	},
	"PodSecurityContext": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{}
		return reflect.ValueOf(p.Spec.SecurityContext), field.NewPath("spec", "securityContext")
	},
	"Container": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		return reflect.ValueOf(ctr(p)), containerPath()
	},
	"SecurityContext": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		ctr(p).SecurityContext = &corev1.SecurityContext{}
		return reflect.ValueOf(ctr(p).SecurityContext), containerPath().Child("securityContext")
	},
	"ResourceRequirements": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		return reflect.ValueOf(&ctr(p).Resources), containerPath().Child("resources")
	},
	"VolumeMount": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		c := ctr(p)
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/again"})
		return reflect.ValueOf(&c.VolumeMounts[len(c.VolumeMounts)-1]), containerPath().Child("volumeMounts").Index(len(c.VolumeMounts) - 1)
	},
	"EnvVarSource": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		ctr(p).Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{}}}
		return reflect.ValueOf(ctr(p).Env[0].ValueFrom), containerPath().Child("env").Index(0).Child("valueFrom")
	},
	"HTTPGetAction": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		ctr(p).ReadinessProbe = probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}})
		return reflect.ValueOf(ctr(p).ReadinessProbe.HTTPGet), containerPath().Child("readinessProbe", "httpGet")
	},
	"GRPCAction": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		ctr(p).ReadinessProbe = probe(corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}})
		return reflect.ValueOf(ctr(p).ReadinessProbe.GRPC), containerPath().Child("readinessProbe", "grpc")
	},
	"Volume": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		return addVolume(p, corev1.VolumeSource{}), volumePath(p)
	},
	"EmptyDirVolumeSource": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		return addVolume(p, corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}).Elem().FieldByName("EmptyDir"), volumePath(p).Child("emptyDir")
	},
	"SecretVolumeSource": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		return addVolume(p, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}).Elem().FieldByName("Secret"), volumePath(p).Child("secret")
	},
	"ConfigMapVolumeSource": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		src := &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}
		return addVolume(p, corev1.VolumeSource{ConfigMap: src}).Elem().FieldByName("ConfigMap"), volumePath(p).Child("configMap")
	},
	"DownwardAPIVolumeSource": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		return addVolume(p, corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}).Elem().FieldByName("DownwardAPI"), volumePath(p).Child("downwardAPI")
	},
	"ProjectedVolumeSource": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		return addVolume(p, corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}).Elem().FieldByName("Projected"), volumePath(p).Child("projected")
	},
	"KeyToPath": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		src := &corev1.SecretVolumeSource{SecretName: "s", Items: []corev1.KeyToPath{{Key: "k", Path: "p"}}}
		addVolume(p, corev1.VolumeSource{Secret: src})
		return reflect.ValueOf(&src.Items[0]), volumePath(p).Child("secret", "items").Index(0)
	},
	"DownwardAPIVolumeFile": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		item := corev1.DownwardAPIVolumeFile{Path: "name", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}
		src := &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{item}}
		addVolume(p, corev1.VolumeSource{DownwardAPI: src})
		return reflect.ValueOf(&src.Items[0]), volumePath(p).Child("downwardAPI", "items").Index(0)
	},
	"VolumeProjection": func(p *corev1.Pod) (reflect.Value, *field.Path) {
		src := &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{}}}
		addVolume(p, corev1.VolumeSource{Projected: src})
		return reflect.ValueOf(&src.Sources[0]), volumePath(p).Child("projected", "sources").Index(0)
	},
}

// refusingValues are the values of refused fields that are refused only for some
// values; every other refused field is set to a non-zero value (see nonZero).
var refusingValues = map[string]any{
	"PodSpec.os":             &corev1.PodOS{Name: corev1.Windows},
	"PodSpec.resources":      &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
	"HTTPGetAction.protocol": new(corev1.HTTPProtocolHTTP2),
	"GRPCAction.mode":        new(corev1.GRPCProbeModeTLS),
}

// TestFieldContractRefusalsReachUsers sets each refused field on a valid pod and checks
// that validation refuses it at that field with the contract's message.
func TestFieldContractRefusalsReachUsers(t *testing.T) {
	for _, ct := range walkContract() {
		typ := ct.typ.Name()
		for _, f := range ct.fields {
			r := contract[typ][f.name]
			if r.verdict != verdictRefused {
				continue
			}
			key := typ + "." + f.name
			t.Run(key, func(t *testing.T) {
				base, ok := refusalBases[typ]
				if !ok {
					t.Fatalf("no base for %s in refusalBases: add one", typ)
				}
				pod := validPod()
				v, p := base(pod)
				fv := v.Elem().FieldByIndex(goField(t, v.Elem().Type(), f.name))
				if want, ok := refusingValues[key]; ok {
					fv.Set(reflect.ValueOf(want))
				} else {
					fv.Set(nonZero(t, fv.Type()))
				}
				want := p.Child(f.name).String()
				for _, e := range Validate(pod) {
					at := e.Field == want || strings.HasPrefix(e.Field, want+"[")
					if at && e.Type == field.ErrorTypeForbidden && e.Detail == r.text {
						return
					}
				}
				t.Errorf("Validate with %s set = %v, want Forbidden at %s: %s", key, Validate(pod), want, r.text)
			})
		}
	}
}

// goField finds the Go field of a struct by its JSON name, through embedded structs.
func goField(t *testing.T, st reflect.Type, name string) []int {
	t.Helper()
	for i := range st.NumField() {
		f := st.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return []int{i}
		}
		if f.Anonymous && tag == "" {
			if f.Type.Kind() == reflect.Struct {
				if idx := goFieldOrNil(f.Type, name); idx != nil {
					return append([]int{i}, idx...)
				}
			}
		}
	}
	t.Fatalf("%s has no field %s", st, name)
	return nil
}

func goFieldOrNil(st reflect.Type, name string) []int {
	for i := range st.NumField() {
		f := st.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return []int{i}
		}
	}
	return nil
}

// nonZero makes a value that sets a field: a pointer to a zero struct or to true, 1 or
// "x"; a list of one; a resource list of one CPU.
func nonZero(t *testing.T, typ reflect.Type) reflect.Value {
	t.Helper()
	switch typ.Kind() {
	case reflect.Pointer:
		v := reflect.New(typ.Elem())
		if typ.Elem().Kind() != reflect.Struct {
			v.Elem().Set(nonZero(t, typ.Elem()))
		}
		return v
	case reflect.Slice:
		v := reflect.MakeSlice(typ, 1, 1)
		if typ.Elem().Kind() != reflect.Struct {
			v.Index(0).Set(nonZero(t, typ.Elem()))
		}
		return v
	case reflect.Map:
		if typ != reflect.TypeFor[corev1.ResourceList]() {
			t.Fatalf("no non-zero value for %s", typ)
		}
		return reflect.ValueOf(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
	case reflect.Bool:
		return reflect.ValueOf(true).Convert(typ)
	case reflect.String:
		return reflect.ValueOf("x").Convert(typ)
	case reflect.Int32, reflect.Int64:
		return reflect.ValueOf(int64(1)).Convert(typ)
	}
	t.Fatalf("no non-zero value for %s", typ)
	return reflect.Value{}
}

func containerPath() *field.Path { return field.NewPath("spec", "containers").Index(0) }

func volumePath(p *corev1.Pod) *field.Path {
	return field.NewPath("spec", "volumes").Index(len(p.Spec.Volumes) - 1)
}

// addVolume adds a volume with src, mounted in the first container, and returns a
// pointer to it for a base to set fields on.
func addVolume(p *corev1.Pod, src corev1.VolumeSource) reflect.Value {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "extra", VolumeSource: src})
	ctr(p).VolumeMounts = append(ctr(p).VolumeMounts, corev1.VolumeMount{Name: "extra", MountPath: "/extra"})
	return reflect.ValueOf(&p.Spec.Volumes[len(p.Spec.Volumes)-1])
}

func probe(h corev1.ProbeHandler) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: h, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
}
