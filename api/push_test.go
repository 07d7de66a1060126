package api

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/httpsource"
)

const validManifest = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: nginx
    image: nginx
    bogus: 1
---
apiVersion: v1
kind: Pod
metadata:
  name: job
  namespace: batch
spec:
  restartPolicy: Never
  containers:
  - name: run
    image: busybox
`

// invalidManifest has an error in each of its two documents.
const invalidManifest = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: c
---
apiVersion: v1
kind: Pod
metadata:
  name: job
spec:
  restartPolicy: Sometimes
  containers:
  - name: c
    image: busybox
`

func TestPutValidManifestStoresItAndNamesItsPods(t *testing.T) {
	store := newFakeStore()
	s := mustNew(t, testConfig(newFakeBackend(), store))
	rec := serve(t, s.Handler(), http.MethodPut, "/manifests/web", strings.NewReader(validManifest))
	if rec.Code != http.StatusOK {
		t.Fatalf("PUT = %d %s", rec.Code, rec.Body)
	}
	var got Pushed
	decodeJSON(t, rec.Body.Bytes(), &got)
	want := Pushed{
		Name: "web",
		Pods: []string{"default/web-node1", "batch/job-node1"},
		Warnings: []Problem{{
			Document: 1, Field: "spec.containers[0].bogus",
			Message: "Unsupported value: unknown field, not part of a v1 Pod (a typo?)",
			Text:    "web (document 1): spec.containers[0].bogus: Unsupported value: unknown field, not part of a v1 Pod (a typo?)",
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PUT answer (-want +got):\n%s", diff)
	}
	if data, _ := store.Get("web"); string(data) != validManifest {
		t.Errorf("the store holds %q, want the body pushed", data)
	}

	rec = serve(t, s.Handler(), http.MethodGet, "/manifests/web", nil)
	if rec.Code != http.StatusOK || rec.Body.String() != validManifest || rec.Header().Get("Content-Type") != "application/yaml" {
		t.Errorf("GET /manifests/web = %d %s %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	rec = serve(t, s.Handler(), http.MethodGet, "/manifests", nil)
	var list []httpsource.Manifest
	decodeJSON(t, rec.Body.Bytes(), &list)
	if len(list) != 1 || list[0].Name != "web" {
		t.Errorf("GET /manifests = %s, want the one manifest web", rec.Body)
	}
}

func TestPutInvalidManifestListsEveryErrorAndStoresNothing(t *testing.T) {
	store := newFakeStore()
	s := mustNew(t, testConfig(newFakeBackend(), store))
	rec := serve(t, s.Handler(), http.MethodPut, "/manifests/bad", strings.NewReader(invalidManifest))
	st := wantStatus(t, rec, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	var got Invalid
	decodeJSON(t, rec.Body.Bytes(), &got)
	unsupported := `Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`
	want := []Problem{
		{Document: 1, Field: "spec.containers[0].image", Message: "Required value", Text: "bad (document 1): spec.containers[0].image: Required value"},
		{Document: 2, Field: "spec.restartPolicy", Message: unsupported, Text: "bad (document 2): spec.restartPolicy: " + unsupported},
	}
	if diff := cmp.Diff(want, got.Errors); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	wantCauses := []metav1.StatusCause{
		{Type: metav1.CauseTypeFieldValueRequired, Field: "spec.containers[0].image", Message: "Required value"},
		{Type: metav1.CauseTypeFieldValueNotSupported, Field: "spec.restartPolicy", Message: unsupported},
	}
	if diff := cmp.Diff(wantCauses, st.Details.Causes); diff != "" {
		t.Errorf("status causes (-want +got):\n%s", diff)
	}
	if list := store.List(); len(list) != 0 {
		t.Errorf("the store holds %v after an invalid push, want nothing", list)
	}
}

func TestPutRefusesBadNamesAndLargeBodies(t *testing.T) {
	store := newFakeStore()
	s := mustNew(t, testConfig(newFakeBackend(), store))
	for _, name := range []string{"a..b", "a%2Fb", "Web", "-x", "web.yaml"} {
		rec := serve(t, s.Handler(), http.MethodPut, "/manifests/"+name, strings.NewReader(validManifest))
		wantStatus(t, rec, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	}
	big := bytes.Repeat([]byte("# padding\n"), maxBodyBytes/10+1)
	rec := serve(t, s.Handler(), http.MethodPut, "/manifests/big", bytes.NewReader(big))
	wantStatus(t, rec, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge)
	if list := store.List(); len(list) != 0 {
		t.Errorf("the store holds %v, want nothing", list)
	}
}

func TestDeleteManifest(t *testing.T) {
	store := newFakeStore()
	s := mustNew(t, testConfig(newFakeBackend(), store))
	serve(t, s.Handler(), http.MethodPut, "/manifests/web", strings.NewReader(validManifest))

	rec := serve(t, s.Handler(), http.MethodDelete, "/manifests/web", nil)
	var st metav1.Status
	decodeJSON(t, rec.Body.Bytes(), &st)
	want := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess, Code: 200,
		Details: &metav1.StatusDetails{Name: "web", Kind: "manifests"},
	}
	if rec.Code != http.StatusOK || !cmp.Equal(want, st, cmpopts.EquateEmpty()) {
		t.Errorf("DELETE = %d %s, want 200 %+v", rec.Code, rec.Body, want)
	}
	if _, err := store.Get("web"); err == nil {
		t.Error("the manifest is still stored after DELETE")
	}
	rec = serve(t, s.Handler(), http.MethodDelete, "/manifests/web", nil)
	st = wantStatus(t, rec, http.StatusNotFound, metav1.StatusReasonNotFound)
	if st.Message != `manifests "web" not found` {
		t.Errorf("second DELETE message = %q", st.Message)
	}
	rec = serve(t, s.Handler(), http.MethodGet, "/manifests/web", nil)
	wantStatus(t, rec, http.StatusNotFound, metav1.StatusReasonNotFound)
}

func TestManifestsWithoutPushSource(t *testing.T) {
	s := mustNew(t, testConfig(newFakeBackend(), nil))
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/manifests"}, {http.MethodGet, "/manifests/web"},
		{http.MethodPut, "/manifests/web"}, {http.MethodDelete, "/manifests/web"},
	} {
		rec := serve(t, s.Handler(), req.method, req.path, strings.NewReader(validManifest))
		st := wantStatus(t, rec, http.StatusNotFound, metav1.StatusReasonNotFound)
		if st.Message != "push source disabled" {
			t.Errorf("%s %s message = %q, want push source disabled", req.method, req.path, st.Message)
		}
	}
}
