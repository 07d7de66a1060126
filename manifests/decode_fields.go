package manifests

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// explain says why js did not decode into a value of type t: one problem for each value
// that does not decode, with its field path under path. encoding/json cannot say it
// itself: it stops at the first bad value, names it without list indexes, and names a
// value whose type decodes itself (a quantity, an int-or-string) not at all. err, the
// decoder's own error, is the answer only when no single value is to blame.
func explain(js []byte, t reflect.Type, path *field.Path, err error) []Problem {
	errs := valueErrors(js, t, path)
	if len(errs) == 0 {
		return []Problem{{Err: invalid(path, cleanJSONError(err))}}
	}
	ps := make([]Problem, 0, len(errs))
	for _, e := range errs {
		ps = append(ps, Problem{Err: e})
	}
	return ps
}

// valueErrors decodes js into a value of type t one field, list item and map entry at a
// time, as the decoder would (case-sensitive names; unknown fields and null are skipped),
// and returns an error for each value that does not decode. Fields and map entries come
// in key order: converting YAML to JSON has already lost the order they were written in.
func valueErrors(js []byte, t reflect.Type, path *field.Path) field.ErrorList {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if bytes.Equal(js, []byte("null")) {
		return nil // null leaves a Go value as it is
	}
	if decodesItself(t) {
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, reflect.New(t).Interface()); err != nil {
			return field.ErrorList{valueError(path, js, t, err)}
		}
		return nil
	}
	var errs field.ErrorList
	switch t.Kind() {
	case reflect.Struct:
		var members map[string]json.RawMessage
		if err := json.Unmarshal(js, &members); err != nil {
			return field.ErrorList{valueError(path, js, t, err)}
		}
		fields := jsonFields(t)
		for _, name := range slices.Sorted(maps.Keys(members)) {
			if ft, ok := fields[name]; ok {
				errs = append(errs, valueErrors(members[name], ft, path.Child(name))...)
			}
		}
	case reflect.Slice:
		var items []json.RawMessage
		if err := json.Unmarshal(js, &items); err != nil {
			return field.ErrorList{valueError(path, js, t, err)}
		}
		for i, item := range items {
			errs = append(errs, valueErrors(item, t.Elem(), path.Index(i))...)
		}
	case reflect.Map:
		var entries map[string]json.RawMessage
		if err := json.Unmarshal(js, &entries); err != nil {
			return field.ErrorList{valueError(path, js, t, err)}
		}
		for _, key := range slices.Sorted(maps.Keys(entries)) {
			errs = append(errs, valueErrors(entries[key], t.Elem(), path.Key(key))...)
		}
	}
	return errs
}

// decodesItself says whether values of type t are decoded whole: by their own
// UnmarshalJSON or UnmarshalText, or because they are not made of named parts.
func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	if p.Implements(reflect.TypeFor[json.Unmarshaler]()) || p.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct:
		return false
	case reflect.Slice:
		return t.Elem().Kind() == reflect.Uint8 // []byte is a base64 string
	case reflect.Map:
		return t.Key().Kind() != reflect.String
	}
	return true
}

// jsonFields maps the JSON names of t's fields to their types, with the fields of
// embedded structs (TypeMeta) promoted. As in encoding/json, a field of t itself wins
// over a promoted one of the same name.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			embedded = append(embedded, ft)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	for _, et := range embedded {
		for name, ft := range jsonFields(et) {
			if _, ok := fields[name]; !ok {
				fields[name] = ft
			}
		}
	}
	return fields
}

// valueError is the field error for js, a value at path that does not decode into a t.
// A scalar is quoted; a list or mapping is only named. A type mismatch says what was
// expected, in YAML's words rather than Go's; any other error (a quantity's syntax) is
// kept as the type wrote it.
func valueError(path *field.Path, js []byte, t reflect.Type, err error) *field.Error {
	want := "expected " + describe(t)
	v, ok := scalar(js)
	if !ok {
		return invalid(path, want+", not "+jsonKind(js))
	}
	detail := cleanJSONError(err)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		detail = want
		if _, isNumber := v.(json.Number); isNumber && isInteger(t) {
			detail += " " + intRange(t) // a fraction, or out of range
		}
	}
	return &field.Error{Type: field.ErrorTypeInvalid, Field: pathString(path), BadValue: v, Detail: detail}
}

// scalar returns the JSON scalar js as a field error quotes it: a string, a bool, or a
// json.Number (printed as written, unquoted). It returns false for a list or mapping.
func scalar(js []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	switch v.(type) {
	case string, bool, json.Number:
		return v, true
	}
	return nil, false
}

// describe names what a value of type t is written as in YAML.
func describe(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[resource.Quantity]():
		return "a quantity such as 500m or 1Gi"
	case reflect.TypeFor[intstr.IntOrString]():
		return "an integer or a string"
	case reflect.TypeFor[metav1.Time](), reflect.TypeFor[metav1.MicroTime]():
		return "a time such as 2006-01-02T15:04:05Z"
	}
	switch {
	case isInteger(t):
		return "an integer"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return "a base64 string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	}
	return "a " + t.String()
}

func isInteger(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// intRange is the range of the integer type t: "from 0 to 255".
func intRange(t reflect.Type) string {
	bits := t.Bits()
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		return fmt.Sprintf("from 0 to %d", uint64(math.MaxUint64)>>(64-bits))
	}
	return fmt.Sprintf("from %d to %d", int64(math.MinInt64)>>(64-bits), int64(math.MaxInt64)>>(64-bits))
}

// pathString is path as a field error names it: "" for the document itself.
func pathString(path *field.Path) string {
	if path == nil {
		return ""
	}
	return path.String()
}
