package testenv

import (
	"bytes"
	"context"
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
	blobRate   atomic.Int64 // see ThrottleBlobs
}

// SlowBlobs makes every blob download from now on wait d before it is served, as over
// a slow link; manifests and pushes are not slowed.
func (r *Registry) SlowBlobs(d time.Duration) { r.blobDelay.Store(int64(d)) }

// ThrottleBlobs makes every blob download from now on stream at about bytesPerSecond, a
// tenth of it every 100 ms, as over a slow link, so that a pull's progress can be seen
// growing; 0 serves at full speed.
func (r *Registry) ThrottleBlobs(bytesPerSecond int) { r.blobRate.Store(int64(bytesPerSecond)) }

// throttled writes a response a chunk every 100 ms.
type throttled struct {
	http.ResponseWriter
	ctx   context.Context
	chunk int
}

func (t throttled) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), t.chunk)
		w, err := t.ResponseWriter.Write(p[:c])
		n += w
		if err != nil {
			return n, err
		}
		if f, ok := t.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		p = p[c:]
		select {
		case <-time.After(100 * time.Millisecond):
		case <-t.ctx.Done():
			return n, t.ctx.Err()
		}
	}
	return n, nil
}

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
		if rate := r.blobRate.Load(); rate > 0 && req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			w = throttled{ResponseWriter: w, ctx: req.Context(), chunk: max(int(rate/10), 1)}
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
	binary, applets, platform, err := readBusybox(busyboxPath(opts))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := buildLayer(binary, applets, opts.Files)
	if err != nil {
		t.Fatal(err)
	}
	blobs, index, err := buildBlobs(opts, platform, layer)
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
