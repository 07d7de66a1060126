package manifests

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The field contract: every field of a Pod is honoured as the kubelet honours it on one
// node (and a test proves it), refused with the field named (and the message says why
// and what to do instead), or of no effect by design (and the reason says why). The
// rules are keyed by the Go type that declares a field and the field's JSON name
// ("Container.image"), so that a type reached from several places (a Probe, a
// SecurityContext) is classified once. The types are walked by reflection from
// corev1.Pod, descending only into fields that are honoured: what lies below a refused
// or ineffective field is never read. A test fails when a field the walk reaches has no
// rule, or a rule names a field the walk no longer reaches (a k8s.io/api upgrade added
// or removed it), and the docs' "Pod fields" table is rendered from the same rules.
// The rules are data of the tests and the docs alone: validation (validate*.go) is
// what refuses a field, and a test checks each refusal below against it.

// verdict is what staticpod does with a field.
type verdict int

const (
	verdictHonoured verdict = iota + 1 // applied as the kubelet applies it
	verdictRefused                     // a pod that sets it fails validation at the field
	verdictNoEffect                    // accepted and, by design, changes nothing on one node
)

// rule classifies one field.
type rule struct {
	verdict verdict
	proof   string // honoured: the test that proves it, as "dir.TestName" ("e2e.TestExec")
	when    string // refused: the values refused, when not every value is ("false")
	text    string // refused: the message users get; no effect: why; honoured: a note
}

func honoured(proof string) rule { return rule{verdict: verdictHonoured, proof: proof} }

func honouredNote(proof, note string) rule {
	return rule{verdict: verdictHonoured, proof: proof, text: note}
}

func refused(msg string) rule { return rule{verdict: verdictRefused, text: msg} }

func refusedWhen(when, msg string) rule { return rule{verdict: verdictRefused, when: when, text: msg} }

func noEffect(reason string) rule { return rule{verdict: verdictNoEffect, text: reason} }

// contract holds the rules of every area, by declaring type and then JSON field name.
var contract = mergeRules(podRules, specRules, nodeRules, securityRules, containerRules, handlerRules, volumeRules)

func mergeRules(areas ...map[string]map[string]rule) map[string]map[string]rule {
	all := map[string]map[string]rule{}
	for _, area := range areas {
		for typ, fields := range area {
			if _, dup := all[typ]; dup {
				panic("field contract: type " + typ + " classified twice")
			}
			all[typ] = fields
		}
	}
	return all
}

// contractType is a struct type the walk reaches: where it appears in a pod, and its
// fields in the order the API declares them.
type contractType struct {
	typ    reflect.Type
	paths  []string
	fields []contractField
}

type contractField struct {
	name string // the JSON name
	typ  reflect.Type
}

// walkContract walks the types of a Pod from corev1.Pod, breadth first, descending into
// the struct types of honoured fields and of fields with no rule (so that everything
// unclassified is found at once).
func walkContract() []*contractType {
	var order []*contractType
	byType := map[reflect.Type]*contractType{}
	type visit struct {
		typ  reflect.Type
		path string
	}
	queue := []visit{{reflect.TypeFor[corev1.Pod](), ""}}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		if ct, seen := byType[v.typ]; seen {
			ct.paths = append(ct.paths, v.path)
			continue
		}
		ct := &contractType{typ: v.typ, paths: []string{v.path}, fields: declaredFields(v.typ)}
		byType[v.typ] = ct
		order = append(order, ct)
		for _, f := range ct.fields {
			r, ok := contract[v.typ.Name()][f.name]
			if ok && r.verdict != verdictHonoured {
				continue
			}
			elem, list := contractElem(f.typ)
			if elem == nil {
				continue
			}
			p := strings.TrimPrefix(v.path+"."+f.name, ".")
			if list {
				p += "[*]"
			}
			queue = append(queue, visit{elem, p})
		}
	}
	return order
}

// declaredFields lists the fields of a struct by JSON name, with embedded (inline) structs
// flattened as JSON flattens them.
func declaredFields(t reflect.Type) []contractField {
	var out []contractField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "":
			out = append(out, declaredFields(f.Type)...)
		case name != "" && name != "-" && f.IsExported():
			out = append(out, contractField{name, f.Type})
		}
	}
	return out
}

// contractElem returns the struct type a field leads to, if the walk descends into it:
// the API's own structs and ObjectMeta, not leaf values such as a Quantity or a Time.
// list says whether the field holds a list of them.
func contractElem(t reflect.Type) (elem reflect.Type, list bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		list = list || t.Kind() == reflect.Slice
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	if t.PkgPath() == reflect.TypeFor[corev1.Pod]().PkgPath() || t.Name() == "ObjectMeta" {
		return t, list
	}
	return nil, false
}

// fieldTable renders the contract as the Markdown of the docs' "Pod fields" section.
func fieldTable() (string, error) {
	var b strings.Builder
	for _, ct := range walkContract() {
		paths := make([]string, len(ct.paths))
		for i, p := range ct.paths {
			paths[i] = "`" + p + "`"
		}
		if ct.paths[0] == "" {
			paths = []string{"the Pod itself"}
		}
		fmt.Fprintf(&b, "\n**%s**: %s\n\n| field | verdict | proof, message or reason |\n| --- | --- | --- |\n", ct.typ.Name(), strings.Join(paths, ", "))
		for _, f := range ct.fields {
			r, ok := contract[ct.typ.Name()][f.name]
			if !ok {
				return "", fmt.Errorf("render field table: %s.%s has no rule", ct.typ.Name(), f.name)
			}
			verdictText, detail := r.describe()
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.name, verdictText, strings.ReplaceAll(detail, "|", "\\|"))
		}
	}
	return b.String(), nil
}

// describe says what a rule means, for the table: its verdict and its detail.
func (r rule) describe() (string, string) {
	switch r.verdict {
	case verdictHonoured:
		detail := "`" + r.proof + "`"
		if r.text != "" {
			detail += "; " + r.text
		}
		return "honoured", detail
	case verdictRefused:
		if r.when != "" {
			return "refused when " + r.when, r.text
		}
		return "refused", r.text
	default:
		return "no effect", r.text
	}
}
