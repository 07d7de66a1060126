package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/runner"
)

type fakeImages struct {
	images []runner.ImageUse
	err    error
}

func (f fakeImages) Images(context.Context) ([]runner.ImageUse, error) { return f.images, f.err }

func TestImagesSortedByName(t *testing.T) {
	cfg := testConfig(newFakeBackend(), nil)
	cfg.Images = fakeImages{images: []runner.ImageUse{
		{StoredImage: runner.StoredImage{ID: "sha256:b", Names: []string{"example.com/b:1"}, Size: 20}},
		{StoredImage: runner.StoredImage{ID: "sha256:a", Names: []string{"example.com/a:1"}, Size: 10}, InUse: true},
	}}
	rec := serve(t, mustNew(t, cfg).Handler(), http.MethodGet, "/images", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /images = %d %s", rec.Code, rec.Body)
	}
	var got []runner.ImageUse
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, img := range got {
		names = append(names, img.Names[0])
	}
	if diff := cmp.Diff([]string{"example.com/a:1", "example.com/b:1"}, names); diff != "" || !got[0].InUse {
		t.Errorf("GET /images = %s (-want +got names):\n%s", rec.Body, diff)
	}

	cfg.Images = fakeImages{err: errors.New("containerd is gone")}
	if rec := serve(t, mustNew(t, cfg).Handler(), http.MethodGet, "/images", nil); rec.Code != http.StatusInternalServerError {
		t.Errorf("GET /images with a failing runtime = %d, want 500", rec.Code)
	}
	cfg.Images = nil
	if rec := serve(t, mustNew(t, cfg).Handler(), http.MethodGet, "/images", nil); rec.Code != http.StatusNotFound {
		t.Errorf("GET /images without images = %d, want 404", rec.Code)
	}
}
