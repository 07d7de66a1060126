package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/staticpod/staticpod/manifests"
)

// secretMask replaces each value of a Secret the API serves, as `kubectl diff` masks
// them. It is not base64, so that a served manifest pushed back unchanged is refused
// rather than storing the mask as the Secret's value.
const secretMask = "***"

// lastApplied is kubectl's annotation holding a whole object as it was applied: on a
// Secret copied from `kubectl get -o yaml`, its values too.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// redactSecrets returns manifest with every value of every Secret in it replaced by
// secretMask, keys kept (see redactSecret). A document that holds no Secret is returned as it was written,
// comments included; one that does is written anew from its content, as YAML (or as
// JSON when the manifest is a JSON object). It splits the manifest as manifests.Decode
// does and recognises a Secret more widely than Decode (any spelling of kind, at any
// depth), so that nothing Decode reads as a Secret escapes. A manifest it cannot read is
// an error, never returned unredacted.
func redactSecrets(manifest []byte) ([]byte, error) {
	isJSON := bytes.HasPrefix(bytes.TrimLeft(manifest, " \t\r\n"), []byte("{"))
	docs, err := manifests.SplitDocuments(manifest)
	if err != nil {
		return nil, fmt.Errorf("redact: %w", err)
	}
	changed := false
	for i, doc := range docs {
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("redact document %d: %w", i+1, err)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.UseNumber() // numbers as written, not as float64
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("redact document %d: %w", i+1, err)
		}
		if !redactValue(v) {
			continue
		}
		changed = true
		if isJSON {
			out, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				return nil, fmt.Errorf("redact document %d: %w", i+1, err)
			}
			docs[i] = append(out, '\n')
			continue
		}
		out, err := yaml.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("redact document %d: %w", i+1, err)
		}
		docs[i] = out
	}
	if !changed {
		return manifest, nil
	}
	var out bytes.Buffer
	for i, doc := range docs {
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(doc)
		if len(doc) > 0 && doc[len(doc)-1] != '\n' {
			out.WriteByte('\n')
		}
	}
	return out.Bytes(), nil
}

// redactValue masks the values of every Secret in v, an object decoded from JSON, at
// any depth (the items of a List, say), and reports whether it masked anything.
func redactValue(v any) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		if isSecret(v) {
			changed = redactSecret(v)
		}
		for _, child := range v {
			changed = redactValue(child) || changed
		}
	case []any:
		for _, child := range v {
			changed = redactValue(child) || changed
		}
	}
	return changed
}

// isSecret reports whether obj says it is a Secret. Keys are matched without regard to
// case, as encoding/json matches the kind that manifests.Decode reads.
func isSecret(obj map[string]any) bool {
	for k, v := range obj {
		if s, ok := v.(string); ok && strings.EqualFold(k, "kind") && strings.EqualFold(s, "Secret") {
			return true
		}
	}
	return false
}

// redactSecret masks each value of the Secret obj, and kubectl's last-applied
// annotation, which holds them too. The keys of stringData join those of data, as the
// apiserver merges them: a Secret is served as `kubectl get -o yaml` shows one, and a
// served manifest pushed back is refused (the mask is not base64) rather than storing
// the mask as a value. It reports whether it masked anything.
func redactSecret(obj map[string]any) bool {
	changed := false
	for k, v := range obj {
		switch {
		case strings.EqualFold(k, "stringData"):
			delete(obj, k)
			if m, ok := v.(map[string]any); ok {
				data, _ := obj["data"].(map[string]any)
				if data == nil {
					data = map[string]any{}
					obj["data"] = data
				}
				for key := range m {
					data[key] = secretMask
				}
			}
			changed = changed || v != nil
		case strings.EqualFold(k, "data"):
			changed = mask(obj, k, v) || changed
		case strings.EqualFold(k, "metadata"):
			meta, _ := v.(map[string]any)
			for mk, mv := range meta {
				if strings.EqualFold(mk, "annotations") {
					annotations, _ := mv.(map[string]any)
					if av, ok := annotations[lastApplied]; ok && av != nil {
						annotations[lastApplied] = secretMask
						changed = true
					}
				}
			}
		}
	}
	return changed
}

// mask replaces each value of the map held at parent[key]; a value there that is not a
// map, which no valid Secret has, is masked whole.
func mask(parent map[string]any, key string, v any) bool {
	if v == nil {
		return false
	}
	m, ok := v.(map[string]any)
	if !ok {
		parent[key] = secretMask
		return true
	}
	for k := range m {
		m[k] = secretMask
	}
	return len(m) > 0
}
