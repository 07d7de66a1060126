package manifests

import (
	"strings"
	"testing"
)

// A Secret value that does not decode (plain text in data, where base64 is expected; a
// number in stringData) is an error at its key that does not quote the value: problems
// go to the log, to events, to `validate` and to the API's answers.
func TestSecretValueThatDoesNotDecodeIsNotQuoted(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: v1\nkind: Secret\nmetadata: {name: db}\ndata:\n  password: hunter2-in-clear\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData:\n  password: 73211234\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: db}\n  data: {password: hunter2-in-clear}\n",
	} {
		d := Decode([]byte(doc))
		if len(d.Errors) == 0 {
			t.Fatalf("Decode(%q) found no error", doc)
		}
		for _, p := range d.Errors {
			if msg := p.Error(); strings.Contains(msg, "hunter2") || strings.Contains(msg, "73211234") || !strings.Contains(p.Field(), "[password]") {
				t.Errorf("Decode(%q) = %q, want an error at the key that does not quote the value", doc, msg)
			}
		}
	}
}
