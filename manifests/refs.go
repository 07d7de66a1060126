package manifests

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// reference is one place where a pod reads a ConfigMap or a Secret: a whole object
// (key "": a volume, envFrom) or one key of it (a volume's item, env[].valueFrom).
type reference struct {
	ref      ObjectRef
	key      string
	optional bool
	fld      *field.Path // the field that names the object, or the key
}

// references lists every place where pod reads a ConfigMap or a Secret, in the order of
// its spec.
func references(pod *corev1.Pod) []reference {
	var out []reference
	ns := pod.Namespace
	add := func(kind, name string, optional *bool, fld *field.Path, items []corev1.KeyToPath, itemsFld *field.Path) {
		opt := optional != nil && *optional
		ref := ObjectRef{Kind: kind, Namespace: ns, Name: name}
		out = append(out, reference{ref: ref, optional: opt, fld: fld})
		for i, item := range items {
			out = append(out, reference{ref: ref, key: item.Key, optional: opt, fld: itemsFld.Index(i).Child("key")})
		}
	}
	keyRef := func(kind, name, key string, optional *bool, fld *field.Path) {
		opt := optional != nil && *optional
		ref := ObjectRef{Kind: kind, Namespace: ns, Name: name}
		out = append(out, reference{ref: ref, optional: opt, fld: fld.Child("name")},
			reference{ref: ref, key: key, optional: opt, fld: fld.Child("key")})
	}
	vols := field.NewPath("spec", "volumes")
	for i, v := range pod.Spec.Volumes {
		p := vols.Index(i)
		switch {
		case v.ConfigMap != nil:
			q := p.Child("configMap")
			add(KindConfigMap, v.ConfigMap.Name, v.ConfigMap.Optional, q.Child("name"), v.ConfigMap.Items, q.Child("items"))
		case v.Secret != nil:
			q := p.Child("secret")
			add(KindSecret, v.Secret.SecretName, v.Secret.Optional, q.Child("secretName"), v.Secret.Items, q.Child("items"))
		case v.Projected != nil:
			for j, s := range v.Projected.Sources {
				q := p.Child("projected", "sources").Index(j)
				switch {
				case s.ConfigMap != nil:
					r := q.Child("configMap")
					add(KindConfigMap, s.ConfigMap.Name, s.ConfigMap.Optional, r.Child("name"), s.ConfigMap.Items, r.Child("items"))
				case s.Secret != nil:
					r := q.Child("secret")
					add(KindSecret, s.Secret.Name, s.Secret.Optional, r.Child("name"), s.Secret.Items, r.Child("items"))
				}
			}
		}
	}
	for _, group := range []struct {
		name       string
		containers []corev1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i, c := range group.containers {
			p := field.NewPath("spec", group.name).Index(i)
			for j, e := range c.EnvFrom {
				q := p.Child("envFrom").Index(j)
				switch {
				case e.ConfigMapRef != nil:
					add(KindConfigMap, e.ConfigMapRef.Name, e.ConfigMapRef.Optional, q.Child("configMapRef", "name"), nil, nil)
				case e.SecretRef != nil:
					add(KindSecret, e.SecretRef.Name, e.SecretRef.Optional, q.Child("secretRef", "name"), nil, nil)
				}
			}
			for j, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				q := p.Child("env").Index(j).Child("valueFrom")
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					keyRef(KindConfigMap, r.Name, r.Key, r.Optional, q.Child("configMapKeyRef"))
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					keyRef(KindSecret, r.Name, r.Key, r.Optional, q.Child("secretKeyRef"))
				}
			}
		}
	}
	return out
}

// References checks that every ConfigMap and Secret pod reads, and every key it names,
// is among objs (the objects of the pod's own source, in its namespace), unless the
// reference says optional: true, and that a spec.overhead is its RuntimeClass's. Each
// missing one is an error at the field that names it.
func References(pod *corev1.Pod, objs Objects) field.ErrorList {
	errs := runtimeClassErrors(pod, objs)
	for _, r := range references(pod) {
		if r.optional || r.ref.Name == "" {
			continue // an empty name is Validate's to report
		}
		data, ok := objs.Data(r.ref)
		switch {
		case !ok && r.key == "":
			errs = append(errs, &field.Error{Type: field.ErrorTypeNotFound, Field: r.fld.String(), BadValue: r.ref.Name,
				Detail: fmt.Sprintf("no %s %s/%s is defined beside the pod (in its source and namespace); add one, or set optional: true", r.ref.Kind, r.ref.Namespace, r.ref.Name)})
		case !ok:
			// The missing object is reported at its name.
		case r.key != "":
			if _, has := data[r.key]; !has {
				errs = append(errs, &field.Error{Type: field.ErrorTypeNotFound, Field: r.fld.String(), BadValue: r.key,
					Detail: fmt.Sprintf("%s %s/%s has no such key (it has %s)", r.ref.Kind, r.ref.Namespace, r.ref.Name, keyList(data))})
			}
		}
	}
	return errs
}

// Referenced returns the objects of objs that pod reads: what its volumes and
// environment depend on.
func Referenced(pod *corev1.Pod, objs Objects) Objects {
	out := NewObjects()
	for _, r := range references(pod) {
		key := r.ref.Namespace + "/" + r.ref.Name
		switch r.ref.Kind {
		case KindConfigMap:
			if cm, ok := objs.ConfigMaps[key]; ok {
				out.ConfigMaps[key] = cm
			}
		case KindSecret:
			if s, ok := objs.Secrets[key]; ok {
				out.Secrets[key] = s
			}
		}
	}
	return out
}

// ReadsObjects reports whether pod reads any ConfigMap or Secret.
func ReadsObjects(pod *corev1.Pod) bool { return len(references(pod)) > 0 }

func keyList(data map[string][]byte) string {
	if len(data) == 0 {
		return "no keys"
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	slices.Sort(keys)
	if len(keys) > 10 {
		keys = append(keys[:10], "...")
	}
	return "keys " + strings.Join(keys, ", ")
}
