package testenv

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Registry is an in-memory registry (go-containerregistry's) on 127.0.0.1, served over
// plain HTTP for the test's lifetime, that wants HTTP basic auth when it has a user.
type Registry struct {
	Host       string // 127.0.0.1:port
	user, pass string
	blobDelay  atomic.Int64 // see SlowBlobs
}

// SlowBlobs makes every blob download from now on wait d before it is served, as over
// a slow link; manifests and pushes are not slowed.
func (r *Registry) SlowBlobs(d time.Duration) { r.blobDelay.Store(int64(d)) }

// StartRegistry starts a Registry; user "" means no authentication.
func StartRegistry(t testing.TB, user, pass string) *Registry {
	r := &Registry{user: user, pass: pass}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, _ := req.BasicAuth(); r.user != "" && (u != r.user || p != r.pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="staticpod-test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if d := time.Duration(r.blobDelay.Load()); d > 0 && req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			select {
			case <-time.After(d):
			case <-req.Context().Done():
				return
			}
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// Push builds the busybox image opts describes (its Ref is ignored) and pushes it as repo
// ("name:tag") with the registry's own credentials. It returns the image's full reference.
func (r *Registry) Push(t testing.TB, repo string, opts ImageOptions) string {
	t.Helper()
	ref := r.Host + "/" + repo
	name, tag, _ := strings.Cut(repo, ":")
	opts.Ref = ref
	binary, applets, err := readBusybox(busyboxPath(opts))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := buildLayer(binary, applets, opts.Files)
	if err != nil {
		t.Fatal(err)
	}
	blobs, index, err := buildBlobs(opts, layer)
	if err != nil {
		t.Fatal(err)
	}
	manifest := index.Manifests[0].Digest
	for d, data := range blobs {
		if d == manifest {
			continue
		}
		loc := r.do(t, "POST", "/v2/"+name+"/blobs/uploads/", "", nil, http.StatusAccepted).Header.Get("Location")
		u, err := url.Parse(loc)
		if err != nil {
			t.Fatalf("push %s: upload location %q: %v", ref, loc, err)
		}
		q := u.Query()
		q.Set("digest", d.String())
		u.RawQuery = q.Encode()
		r.do(t, "PUT", u.RequestURI(), "application/octet-stream", data, http.StatusCreated)
	}
	r.do(t, "PUT", "/v2/"+name+"/manifests/"+tag, ocispec.MediaTypeImageManifest, blobs[manifest], http.StatusCreated)
	return ref
}

// do sends one request of a push and fails t unless it gets want.
func (r *Registry) do(t testing.TB, method, path, contentType string, body []byte, want int) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+r.Host+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if r.user != "" {
		req.SetBasicAuth(r.user, r.pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %s %s, want %d", method, path, resp.Status, msg, want)
	}
	return resp
}
