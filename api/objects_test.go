package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/runner"
)

type fakeObjects struct{ configMaps, secrets []runner.Object }

func (f fakeObjects) ConfigMaps() []runner.Object { return f.configMaps }
func (f fakeObjects) Secrets() []runner.Object    { return f.secrets }

func TestObjectsListedByKind(t *testing.T) {
	cfg := testConfig(newFakeBackend(), nil)
	cm := runner.Object{Kind: "ConfigMap", Namespace: "default", Name: "app", Source: "file", Keys: []string{"app.conf"}}
	secret := runner.Object{Kind: "Secret", Namespace: "default", Name: "creds", Source: "api", Type: "Opaque", Keys: []string{"password"}}
	cfg.Objects = fakeObjects{configMaps: []runner.Object{cm}, secrets: []runner.Object{secret}}
	h := mustNew(t, cfg).Handler()
	for path, want := range map[string][]runner.Object{"/configmaps": {cm}, "/secrets": {secret}} {
		rec := serve(t, h, http.MethodGet, path, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, rec.Code, rec.Body)
		}
		var got []runner.Object
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", path, diff)
		}
	}
	cfg.Objects = nil
	if rec := serve(t, mustNew(t, cfg).Handler(), http.MethodGet, "/secrets", nil); rec.Code != http.StatusNotFound {
		t.Errorf("GET /secrets without objects = %d, want 404", rec.Code)
	}
}
