package manifests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// MaxManifestBytes is the largest manifest staticpod reads. Larger files are refused,
// so that a stray log file in the manifest directory cannot exhaust memory.
const MaxManifestBytes = 10 << 20

// Kinds a manifest document may have.
const (
	kindPod       = "Pod"
	kindPodList   = "PodList"
	kindList      = "List"
	kindConfigMap = "ConfigMap"
	kindSecret    = "Secret"

	kindRuntimeClass       = "RuntimeClass"
	runtimeClassAPIVersion = "node.k8s.io/v1"
)

// Decoded is one pod, ConfigMap, Secret or RuntimeClass as written in a manifest,
// before defaults and identity: one of Pod, ConfigMap, Secret and RuntimeClass is set.
type Decoded struct {
	Doc       int    // 1-based index of the YAML document it came from
	Path      string // field path prefix inside the document: "" or "items[2]"
	Pod       *corev1.Pod
	ConfigMap *corev1.ConfigMap
	Secret    *corev1.Secret

	RuntimeClass *nodev1.RuntimeClass
}

// Decoding is what Decode found in a manifest.
type Decoding struct {
	Pods      []Decoded
	Objects   []Decoded // ConfigMaps, Secrets and RuntimeClasses
	Documents int       // YAML documents in the manifest, empty ones included
	Warnings  []Problem // unknown and duplicate fields
	Errors    []Problem // documents or items that could not be decoded
}

// Decode splits data into YAML documents (JSON is YAML) and decodes the pods in them: a
// Pod, or a PodList or List whose items are pods; and the ConfigMaps, Secrets and
// RuntimeClasses, as documents or items of a List, that the pods of the same source may read. Empty and comment-only documents are
// skipped. Unknown fields are returned as warnings; a document that cannot be decoded is
// an error for each value that does not decode, at its field path, and does not stop the
// other documents from decoding.
func Decode(data []byte) Decoding {
	var d Decoding
	if len(data) > MaxManifestBytes {
		detail := fmt.Sprintf("the manifest is %d bytes; at most %d are read", len(data), MaxManifestBytes)
		d.Errors = []Problem{{Err: invalid(nil, detail)}}
		return d
	}
	docs, err := SplitDocuments(data)
	if err != nil {
		d.Errors = append(d.Errors, Problem{Doc: len(docs) + 1, Err: invalid(nil, err.Error())})
	}
	d.Documents = len(docs)
	for i, doc := range docs {
		p, w, e := decodeDocument(doc)
		for j := range p {
			p[j].Doc = i + 1
			if p[j].Pod != nil {
				d.Pods = append(d.Pods, p[j])
			} else {
				d.Objects = append(d.Objects, p[j])
			}
		}
		d.Warnings = append(d.Warnings, inDocument(w, i+1)...)
		d.Errors = append(d.Errors, inDocument(e, i+1)...)
	}
	return d
}

// SplitDocuments returns the YAML documents of data, a JSON object as one. It keeps empty
// documents so that document numbers in errors match what the user sees between "---"
// lines. Whatever reads a manifest as Decode does splits it here.
func SplitDocuments(data []byte) ([][]byte, error) {
	if bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) {
		return [][]byte{data}, nil // one JSON object; "---" cannot separate JSON
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, fmt.Errorf("split YAML documents: %w", err)
		}
		docs = append(docs, doc)
	}
}

// typeMeta and list are the parts of a document read before its kind is known.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

type list struct {
	typeMeta
	Items []json.RawMessage `json:"items"`
}

// decodeDocument decodes one document: the pods, ConfigMaps and Secrets it holds.
func decodeDocument(doc []byte) (found []Decoded, warnings, errs []Problem) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, nil, []Problem{{Err: invalid(nil, "not valid YAML or JSON: "+cleanYAMLError(err))}}
	}
	js = bytes.TrimSpace(js)
	if len(js) == 0 || string(js) == "null" {
		return nil, nil, nil // empty or comment-only document
	}
	if js[0] != '{' {
		return nil, nil, []Problem{{Err: invalid(nil, "a manifest document must be a mapping (an object) with apiVersion and kind, not "+jsonKind(js))}}
	}
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return nil, nil, explain(js, reflect.TypeFor[typeMeta](), nil, err)
	}
	switch tm.Kind {
	case kindPod:
		pod, w, e := decodePod(js, nil)
		if pod != nil {
			found = append(found, Decoded{Pod: pod})
		}
		return found, w, e
	case kindConfigMap, kindSecret, kindRuntimeClass:
		obj, w, e := decodeObject(js, tm.Kind, nil)
		if obj != nil {
			found = append(found, *obj)
		}
		return found, w, e
	case kindPodList, kindList:
		return decodeList(js, tm)
	case "":
		return nil, nil, []Problem{{Err: field.Required(field.NewPath("kind"), `a static pod manifest needs "kind: Pod" (or PodList, List, ConfigMap, Secret, RuntimeClass)`)}}
	default:
		return nil, nil, []Problem{{Err: field.NotSupported(field.NewPath("kind"), tm.Kind, []string{kindPod, kindPodList, kindList, kindConfigMap, kindSecret, kindRuntimeClass})}}
	}
}

func decodeList(js []byte, tm typeMeta) (found []Decoded, warnings, errs []Problem) {
	if tm.APIVersion != "v1" {
		errs = append(errs, Problem{Err: field.NotSupported(field.NewPath("apiVersion"), tm.APIVersion, []string{"v1"})})
		return nil, nil, errs
	}
	var l list
	if err := json.Unmarshal(js, &l); err != nil {
		return nil, nil, explain(js, reflect.TypeFor[list](), nil, err)
	}
	for i, item := range l.Items {
		path := field.NewPath("items").Index(i)
		var itm typeMeta
		_ = json.Unmarshal(item, &itm) // a non-object item fails in decodePod below
		if tm.Kind == kindList && (itm.Kind == kindConfigMap || itm.Kind == kindSecret || itm.Kind == kindRuntimeClass) {
			obj, w, e := decodeObject(item, itm.Kind, path)
			warnings = append(warnings, w...)
			errs = append(errs, e...)
			if obj != nil {
				found = append(found, *obj)
			}
			continue
		}
		if tm.Kind == kindList && itm.Kind != kindPod {
			errs = append(errs, Problem{Err: field.NotSupported(path.Child("kind"), itm.Kind, []string{kindPod, kindConfigMap, kindSecret, kindRuntimeClass})})
			continue
		}
		pod, w, e := decodePod(item, path)
		warnings = append(warnings, w...)
		errs = append(errs, e...)
		if pod != nil {
			found = append(found, Decoded{Path: path.String(), Pod: pod})
		}
	}
	return found, warnings, errs
}

// decodePod decodes one pod object. Fields the v1 Pod does not have are warnings with
// their path; duplicate keys are warnings too (the last one wins, as in the apiserver's
// non-strict mode).
func decodePod(js []byte, path *field.Path) (*corev1.Pod, []Problem, []Problem) {
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return nil, nil, explain(js, reflect.TypeFor[typeMeta](), path, err)
	}
	if tm.APIVersion == "" && tm.Kind == "" && path != nil {
		tm.APIVersion = "v1" // items of a PodList are pods; they may omit their type
	}
	if tm.APIVersion != "v1" {
		var err *field.Error
		if tm.APIVersion == "" {
			err = field.Required(path.Child("apiVersion"), `a Pod needs "apiVersion: v1"`)
		} else {
			err = field.NotSupported(path.Child("apiVersion"), tm.APIVersion, []string{"v1"})
		}
		return nil, nil, []Problem{{Err: err}}
	}
	pod := &corev1.Pod{}
	strict, err := sigsjson.UnmarshalStrict(js, pod)
	if err != nil {
		return nil, nil, explain(js, reflect.TypeFor[corev1.Pod](), path, err)
	}
	var warnings []Problem
	for _, s := range strict {
		warnings = append(warnings, Problem{Err: strictProblem(path, s, kindPod)})
	}
	pod.Kind, pod.APIVersion = kindPod, "v1"
	return pod, warnings, nil
}

// decodeObject decodes a ConfigMap, Secret or RuntimeClass (kind) as decodePod decodes
// a pod.
func decodeObject(js []byte, kind string, path *field.Path) (*Decoded, []Problem, []Problem) {
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return nil, nil, explain(js, reflect.TypeFor[typeMeta](), path, err)
	}
	version := "v1"
	if kind == kindRuntimeClass {
		version = runtimeClassAPIVersion
	}
	if tm.APIVersion != version {
		var err *field.Error
		if tm.APIVersion == "" {
			err = field.Required(path.Child("apiVersion"), fmt.Sprintf(`a %s needs "apiVersion: %s"`, kind, version))
		} else {
			err = field.NotSupported(path.Child("apiVersion"), tm.APIVersion, []string{version})
		}
		return nil, nil, []Problem{{Err: err}}
	}
	d := &Decoded{}
	var obj any
	var typ reflect.Type
	switch kind {
	case kindConfigMap:
		d.ConfigMap = &corev1.ConfigMap{}
		obj, typ = d.ConfigMap, reflect.TypeFor[corev1.ConfigMap]()
	case kindRuntimeClass:
		d.RuntimeClass = &nodev1.RuntimeClass{}
		obj, typ = d.RuntimeClass, reflect.TypeFor[nodev1.RuntimeClass]()
	default:
		d.Secret = &corev1.Secret{}
		obj, typ = d.Secret, reflect.TypeFor[corev1.Secret]()
	}
	strict, err := sigsjson.UnmarshalStrict(js, obj)
	if err != nil {
		errs := explain(js, typ, path, err)
		if kind == kindSecret {
			omitValues(errs) // the values of a Secret are its secrets: never quoted
		}
		return nil, nil, errs
	}
	var warnings []Problem
	for _, s := range strict {
		warnings = append(warnings, Problem{Err: strictProblem(path, s, kind)})
	}
	if path != nil {
		d.Path = path.String()
	}
	return d, warnings, nil
}

// omitValues drops the values the problems quote.
func omitValues(ps []Problem) {
	for _, p := range ps {
		if p.Err != nil {
			p.Err.BadValue = field.OmitValueType{}
		}
	}
}

// strictProblem turns sigs.k8s.io/json's `unknown field "spec.foo"` into a field error
// whose path is the unknown field's.
func strictProblem(prefix *field.Path, err error, kind string) *field.Error {
	msg := err.Error()
	for _, kind := range []struct{ prefix, detail string }{
		{`unknown field "`, "unknown field, not part of a v1 " + kind + " (a typo?)"},
		{`duplicate field "`, "duplicate field (the last value is used)"},
	} {
		if rest, ok := strings.CutPrefix(msg, kind.prefix); ok {
			name := strings.TrimSuffix(rest, `"`)
			return &field.Error{Type: field.ErrorTypeNotSupported, Field: joinPath(prefix, name), BadValue: field.OmitValueType{}, Detail: kind.detail}
		}
	}
	return invalid(prefix, msg)
}

// invalid is a field error without a value to quote: the whole document or object at
// path is wrong. A nil path means the document itself.
func invalid(path *field.Path, detail string) *field.Error {
	f := ""
	if path != nil {
		f = path.String()
	}
	return &field.Error{Type: field.ErrorTypeInvalid, Field: f, BadValue: field.OmitValueType{}, Detail: detail}
}

func joinPath(prefix *field.Path, name string) string {
	if prefix == nil {
		return name
	}
	return prefix.String() + "." + name
}

func cleanJSONError(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names the kind of a JSON value that is not an object.
func jsonKind(js []byte) string {
	switch js[0] {
	case '[':
		return "a list"
	case '{':
		return "a mapping"
	case '"':
		return "a string"
	default:
		return "a scalar"
	}
}

func cleanYAMLError(err error) string {
	return strings.TrimPrefix(strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "), "yaml: ")
}
