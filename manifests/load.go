package manifests

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
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
	// Warnings do not stop a pod from running: unknown fields, duplicate keys.
	Warnings []Problem
	// Errors are every problem that stops a pod (or the whole document) from running.
	// A caller that keeps the last good state of a manifest should treat any error as a
	// failure of the whole manifest.
	Errors []Problem
}

// Load decodes, defaults, validates and identifies the pods in data, returning every
// problem located by document and field path. It never fails outright: a broken
// document is reported and the rest still load.
func Load(data []byte, opts Options) Result {
	dec := Decode(data)
	res := Result{Warnings: dec.Warnings, Errors: dec.Errors}
	seen := map[string]bool{} // namespace/name of the pods already loaded
	for _, d := range dec.Pods {
		pod := d.Pod
		Default(pod)
		verrs := Validate(pod)
		verrs = append(verrs, validateStaticName(pod, opts.NodeName)...)
		key := Key(pod)
		if len(verrs) == 0 && seen[key] {
			verrs = append(verrs, field.Duplicate(field.NewPath("metadata", "name"), pod.Name))
		}
		if len(verrs) > 0 {
			res.Errors = append(res.Errors, fromFieldErrors(verrs, d)...)
			continue
		}
		seen[key] = true
		Identify(pod, opts.NodeName, opts.Source)
		res.Pods = append(res.Pods, pod)
	}
	sort.SliceStable(res.Errors, func(i, j int) bool { return res.Errors[i].Doc < res.Errors[j].Doc })
	res.locate(opts.Source.Location, dec.Documents)
	return res
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
