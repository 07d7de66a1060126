package manifests

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Options say where a manifest comes from and for which node it is read.
type Options struct {
	NodeName string
	Source   Source
}

// Result is what one manifest (a file, a URL's body, a pushed document) holds.
type Result struct {
	// Pods are the manifest's valid pods, defaulted and with their static identity.
	Pods []*corev1.Pod
	// ConfigMaps and Secrets are the manifest's valid objects, defaulted, for the pods
	// of its source to read (see CheckReferences).
	ConfigMaps []*corev1.ConfigMap
	Secrets    []*corev1.Secret
	// RuntimeClasses are the manifest's valid RuntimeClasses, which runtimeClassName
	// names (see RuntimeHandler).
	RuntimeClasses []*nodev1.RuntimeClass
	// Warnings do not stop a pod from running: unknown fields, duplicate keys.
	Warnings []Problem
	// Errors are every problem that stops a pod (or the whole document) from running.
	// A caller that keeps the last good state of a manifest should treat any error as a
	// failure of the whole manifest.
	Errors []Problem

	location string                  // the manifest's, for the problems CheckReferences adds
	docs     int                     // its documents
	where    map[*corev1.Pod]Decoded // where each pod sits in the manifest
	invalid  []*corev1.Pod           // pods refused already, whose references are checked too
}

// Load decodes, defaults, validates and identifies the pods in data, returning every
// problem located by document and field path. It never fails outright: a broken
// document is reported and the rest still load.
func Load(data []byte, opts Options) Result {
	dec := Decode(data)
	res := Result{Warnings: dec.Warnings, Errors: dec.Errors, location: opts.Source.Location, docs: dec.Documents, where: map[*corev1.Pod]Decoded{}}
	res.loadObjects(dec.Objects)
	seen := map[string]bool{}         // namespace/name of the pods already loaded
	seenUID := map[types.UID]string{} // the UIDs they were given -> namespace/name
	for _, d := range dec.Pods {
		pod := d.Pod
		Default(pod)
		verrs := Validate(pod)
		verrs = append(verrs, validateStaticName(pod, opts.NodeName)...)
		key := Key(pod)
		if len(verrs) == 0 && seen[key] {
			verrs = append(verrs, field.Duplicate(field.NewPath("metadata", "name"), pod.Name))
		}
		if holder, ok := seenUID[pod.UID]; len(verrs) == 0 && pod.UID != "" && ok {
			verrs = append(verrs, UIDTaken(pod.UID, "pod "+holder+" in this manifest"))
		}
		if len(verrs) > 0 {
			res.Errors = append(res.Errors, fromFieldErrors(verrs, d)...)
			res.invalid = append(res.invalid, pod)
			res.where[pod] = d
			continue
		}
		seen[key] = true
		if pod.UID != "" {
			seenUID[pod.UID] = key
		}
		Identify(pod, opts.NodeName, opts.Source)
		res.Pods = append(res.Pods, pod)
		res.where[pod] = d
	}
	sort.SliceStable(res.Errors, func(i, j int) bool { return res.Errors[i].Doc < res.Errors[j].Doc })
	res.locate(opts.Source.Location, dec.Documents)
	return res
}

// loadObjects defaults and validates the ConfigMaps and Secrets of a manifest.
func (r *Result) loadObjects(objs []Decoded) {
	seen := map[string]bool{} // kind namespace/name
	for _, d := range objs {
		var errs field.ErrorList
		var ref ObjectRef
		switch {
		case d.ConfigMap != nil:
			defaultConfigMap(d.ConfigMap)
			errs = validateConfigMap(d.ConfigMap)
			ref = ObjectRef{KindConfigMap, d.ConfigMap.Namespace, d.ConfigMap.Name}
		case d.Secret != nil:
			defaultSecret(d.Secret)
			errs = validateSecret(d.Secret)
			ref = ObjectRef{KindSecret, d.Secret.Namespace, d.Secret.Name}
		case d.RuntimeClass != nil:
			d.RuntimeClass.Kind, d.RuntimeClass.APIVersion = kindRuntimeClass, runtimeClassAPIVersion
			errs = validateRuntimeClass(d.RuntimeClass)
			ref = ObjectRef{Kind: KindRuntimeClass, Name: d.RuntimeClass.Name}
		}
		if len(errs) == 0 && seen[ref.String()] {
			errs = append(errs, field.Duplicate(field.NewPath("metadata", "name"), ref.Name))
		}
		key := ref.String()
		if len(errs) > 0 {
			r.Errors = append(r.Errors, fromFieldErrors(errs, d)...)
			continue
		}
		seen[key] = true
		switch {
		case d.ConfigMap != nil:
			r.ConfigMaps = append(r.ConfigMaps, d.ConfigMap)
		case d.Secret != nil:
			r.Secrets = append(r.Secrets, d.Secret)
		default:
			r.RuntimeClasses = append(r.RuntimeClasses, d.RuntimeClass)
		}
	}
}

// CheckReferences checks the ConfigMaps and Secrets the result's pods read, and the
// RuntimeClasses they name, against objs, the objects of the whole source (see
// References). A pod that reads a missing one is moved from Pods to Errors, each
// problem located at its field. The pods that failed validation are checked too, so
// that every problem is reported at once. A pod that passes gets the overhead of its
// RuntimeClass (AdmitRuntimeClass), as an apiserver's admission gives it.
func (r *Result) CheckReferences(objs Objects) {
	kept := r.Pods[:0]
	var added []Problem
	add := func(pod *corev1.Pod, errs field.ErrorList) {
		for _, p := range fromFieldErrors(errs, r.where[pod]) {
			p.Location, p.Docs = r.location, r.docs
			added = append(added, p)
		}
	}
	for _, pod := range r.Pods {
		errs := References(pod, objs)
		if len(errs) == 0 {
			AdmitRuntimeClass(pod, objs)
			kept = append(kept, pod)
			continue
		}
		add(pod, errs)
	}
	for _, pod := range r.invalid {
		add(pod, References(pod, objs))
	}
	r.invalid = nil // checked once
	r.Pods = kept
	if len(added) > 0 {
		r.Errors = append(r.Errors, added...)
		sort.SliceStable(r.Errors, func(i, j int) bool { return r.Errors[i].Doc < r.Errors[j].Doc })
	}
}

// Objects returns the result's own ConfigMaps, Secrets and RuntimeClasses as a set.
func (r Result) Objects() Objects {
	o := NewObjects()
	o.Add(r.ConfigMaps, r.Secrets)
	o.AddRuntimeClasses(r.RuntimeClasses)
	return o
}

// validateStaticName checks that the name the pod will run under, <name>-<node>, is
// itself a valid pod name, so that a long name fails here rather than in the runtime.
func validateStaticName(pod *corev1.Pod, node string) field.ErrorList {
	if len(validation.IsDNS1123Subdomain(pod.Name)) > 0 {
		return nil // Validate reported the name itself
	}
	name := StaticName(pod.Name, node)
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		detail := fmt.Sprintf("the static pod name %q (name + \"-\" + node name) is not valid: %s", name, msg)
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), pod.Name, detail))
	}
	return errs
}

func (r *Result) locate(location string, docs int) {
	for _, ps := range [][]Problem{r.Warnings, r.Errors} {
		for i := range ps {
			ps[i].Location = location
			ps[i].Docs = docs
		}
	}
}

// Clone returns a copy of r that shares nothing a caller, or CheckReferences, changes:
// a file's result kept to be handed out again when the file has not changed.
func (r Result) Clone() Result {
	out := r
	copies := map[*corev1.Pod]*corev1.Pod{}
	pod := func(p *corev1.Pod) *corev1.Pod {
		if c, ok := copies[p]; ok {
			return c
		}
		c := p.DeepCopy()
		copies[p] = c
		return c
	}
	out.Pods = cloneAll(r.Pods, pod)
	out.invalid = cloneAll(r.invalid, pod)
	out.ConfigMaps = cloneAll(r.ConfigMaps, (*corev1.ConfigMap).DeepCopy)
	out.Secrets = cloneAll(r.Secrets, (*corev1.Secret).DeepCopy)
	out.RuntimeClasses = cloneAll(r.RuntimeClasses, (*nodev1.RuntimeClass).DeepCopy)
	out.Warnings = slices.Clone(r.Warnings)
	out.Errors = slices.Clone(r.Errors)
	if r.where != nil {
		out.where = make(map[*corev1.Pod]Decoded, len(r.where))
		for p, d := range r.where {
			out.where[pod(p)] = d
		}
	}
	return out
}

func cloneAll[T any](items []*T, clone func(*T) *T) []*T {
	if items == nil {
		return nil
	}
	out := make([]*T, len(items))
	for i, it := range items {
		out[i] = clone(it)
	}
	return out
}
