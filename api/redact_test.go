package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/staticpod/staticpod/manifests"
)

// The values of the Secrets below, none of which may be served back ("aHVudGVyMg==" is
// "hunter2"; the last-applied annotation holds them too).
var secretValues = []string{"aHVudGVyMg==", "hunter2", "s3cret-token", "c3NoLWtleQ=="}

const secretManifest = `# the database's password
apiVersion: v1
kind: Secret
metadata:
  name: db
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","data":{"password":"aHVudGVyMg=="},"kind":"Secret","metadata":{"name":"db"},"stringData":{"token":"s3cret-token"}}
data:
  password: aHVudGVyMg==
stringData:
  token: s3cret-token
---
# the web server
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: nginx
    image: nginx
    env:
    - name: PASSWORD
      valueFrom:
        secretKeyRef: {name: db, key: password}
`

// secretListManifest holds a Secret as an item of a List beside a ConfigMap, whose
// values are no secret; its kind is spelled as encoding/json still reads it.
const secretListManifest = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: web}
  data: {colour: blue}
- apiVersion: v1
  Kind: Secret
  metadata: {name: ssh}
  type: kubernetes.io/ssh-auth
  data: {ssh-privatekey: c3NoLWtleQ==}
`

const secretJSONManifest = `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
 "stringData": {"password": "hunter2"}}`

func TestGetManifestMasksSecretValuesAndKeepsKeys(t *testing.T) {
	tests := []struct {
		name, manifest string
		want           map[string]any // the served Secrets' data and stringData, by name
		keep           string         // a part served as it was written
	}{
		{
			name: "yaml", manifest: secretManifest,
			want: map[string]any{"db": map[string]any{"data": map[string]any{"password": "***", "token": "***"},
				"last-applied": "***"}},
			keep: "# the web server\napiVersion: v1\nkind: Pod\n",
		},
		{
			name: "list", manifest: secretListManifest,
			want: map[string]any{"ssh": map[string]any{"data": map[string]any{"ssh-privatekey": "***"}}},
			keep: "colour: blue",
		},
		{
			name: "json", manifest: secretJSONManifest,
			want: map[string]any{"db": map[string]any{"data": map[string]any{"password": "***"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, testConfig(newFakeBackend(), newFakeStore()))
			if rec := serve(t, s.Handler(), http.MethodPut, "/manifests/m", strings.NewReader(tt.manifest)); rec.Code != http.StatusOK {
				t.Fatalf("PUT = %d %s", rec.Code, rec.Body)
			}
			rec := serve(t, s.Handler(), http.MethodGet, "/manifests/m", nil)
			body := rec.Body.String()
			if rec.Code != http.StatusOK {
				t.Fatalf("GET = %d %s", rec.Code, body)
			}
			for _, v := range secretValues {
				if strings.Contains(body, v) {
					t.Errorf("GET /manifests/m serves the Secret value %q:\n%s", v, body)
				}
			}
			if diff := cmp.Diff(tt.want, servedSecrets(t, body)); diff != "" {
				t.Errorf("served Secrets (-want +got):\n%s\n%s", diff, body)
			}
			if !strings.Contains(body, tt.keep) {
				t.Errorf("GET /manifests/m lost %q of what holds no Secret:\n%s", tt.keep, body)
			}
			if rec := serve(t, s.Handler(), http.MethodPut, "/manifests/again", strings.NewReader(body)); rec.Code != http.StatusUnprocessableEntity {
				t.Errorf("PUT of the served manifest = %d %s, want 422: the masks must not be stored as values", rec.Code, rec.Body)
			}
		})
	}
}

// servedSecrets reads the Secrets of a served manifest: by name, their data,
// stringData and last-applied annotation, if any.
func servedSecrets(t *testing.T, manifest string) map[string]any {
	t.Helper()
	docs, err := manifests.SplitDocuments([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	var add func(obj map[string]any)
	add = func(obj map[string]any) {
		if items, ok := obj["items"].([]any); ok {
			for _, item := range items {
				add(item.(map[string]any))
			}
		}
		if !isSecret(obj) {
			return
		}
		got := map[string]any{}
		for _, k := range []string{"data", "stringData"} {
			if v, ok := obj[k]; ok {
				got[k] = v
			}
		}
		meta := obj["metadata"].(map[string]any)
		annotations, _ := meta["annotations"].(map[string]any)
		if a, ok := annotations[lastApplied]; ok {
			got["last-applied"] = a
		}
		out[meta["name"].(string)] = got
	}
	for _, doc := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("the served manifest does not parse: %v\n%s", err, manifest)
		}
		if obj != nil {
			add(obj)
		}
	}
	return out
}

func TestGetManifestWithoutSecretsIsServedAsPushed(t *testing.T) {
	manifest := "# comments stay\n" + validManifest
	got, err := redactSecrets([]byte(manifest))
	if err != nil || string(got) != manifest {
		t.Errorf("redactSecrets = %q, %v; want the manifest unchanged", got, err)
	}
}

func TestGetManifestThatCannotBeRedactedIsNotServed(t *testing.T) {
	store := newFakeStore()
	store.stored["edited"] = []byte("apiVersion: v1\nkind: Secret\ndata: {password: aHVudGVyMg==\n") // edited by hand, unclosed
	s := mustNew(t, testConfig(newFakeBackend(), store))
	rec := serve(t, s.Handler(), http.MethodGet, "/manifests/edited", nil)
	wantStatus(t, rec, http.StatusInternalServerError, metav1.StatusReasonInternalError)
	if strings.Contains(rec.Body.String(), "aHVudGVyMg==") {
		t.Errorf("GET of a manifest that does not parse serves its Secret value: %s", rec.Body)
	}
}
