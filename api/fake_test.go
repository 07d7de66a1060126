package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/httpsource"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/events"
)

const testNode = "node1"

// fakeBackend is a runner as the API sees it, its state set by the test.
type fakeBackend struct {
	events *events.Store

	mu         sync.Mutex // guards pods, healthy, lastRelist, ready and unsettled
	pods       []*corev1.Pod
	healthy    bool
	lastRelist time.Time
	ready      map[string]bool
	unsettled  bool // a wanted pod has no status yet
}

func newFakeBackend(pods ...*corev1.Pod) *fakeBackend {
	return &fakeBackend{events: events.New(steppingClock()), pods: pods, healthy: true, lastRelist: time.Now(), ready: map[string]bool{}}
}

// steppingClock returns a clock that advances a second at each reading, so that events
// recorded one after the other are ordered in time.
func steppingClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
}

func (b *fakeBackend) Pods() []*corev1.Pod {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*corev1.Pod(nil), b.pods...)
}

func (b *fakeBackend) Events() *events.Store { return b.events }

func (b *fakeBackend) Healthy() (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.healthy, b.lastRelist
}

func (b *fakeBackend) SourceReady(source string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ready[source]
}

func (b *fakeBackend) Settled() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.unsettled
}

func (b *fakeBackend) setSettled(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unsettled = !ok
}

func (b *fakeBackend) setHealthy(ok bool, last time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.healthy, b.lastRelist = ok, last
}

func (b *fakeBackend) setReady(source string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ready[source] = true
}

// fakeStore is the push store: it loads manifests as httpsource.Push does and keeps the
// valid ones in memory. Unlike the API it refuses names with dots.
type fakeStore struct {
	mu     sync.Mutex // guards stored
	stored map[string][]byte
}

func newFakeStore() *fakeStore { return &fakeStore{stored: map[string][]byte{}} }

func (f *fakeStore) Put(name string, data []byte) (manifests.Result, error) {
	if strings.Contains(name, ".") {
		return manifests.Result{}, fmt.Errorf("put %s: %w", name, httpsource.ErrInvalidName)
	}
	res := manifests.Load(data, manifests.Options{NodeName: testNode, Source: manifests.Source{Kind: manifests.SourceAPI, Location: name}})
	if len(res.Errors) == 0 {
		f.mu.Lock()
		f.stored[name] = data
		f.mu.Unlock()
	}
	return res, nil
}

func (f *fakeStore) Delete(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.stored[name]; !ok {
		return fmt.Errorf("delete %s: %w", name, httpsource.ErrNotFound)
	}
	delete(f.stored, name)
	return nil
}

func (f *fakeStore) List() []httpsource.Manifest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []httpsource.Manifest
	for name := range f.stored {
		out = append(out, httpsource.Manifest{Name: name, Pods: []string{"default/" + name + "-" + testNode}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *fakeStore) Get(name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, ok := f.stored[name]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", name, httpsource.ErrNotFound)
	}
	return data, nil
}

// testConfig is a Config with a fake backend and store and a quiet logger.
func testConfig(b *fakeBackend, store *fakeStore) Config {
	cfg := Config{
		Backend: b,
		Log:     testLogger(),
	}
	if store != nil {
		cfg.Store = store
	}
	return cfg
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func mustNew(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// serve answers one request with the server's handler.
func serve(t *testing.T, h http.Handler, method, target string, body io.Reader) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, body))
	return rec
}

// decodeJSON decodes a response body into v, failing the test when it is not JSON.
func decodeJSON(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
}

// wantStatus checks that a response is the metav1.Status failure of code and reason.
func wantStatus(t *testing.T, rec *httptest.ResponseRecorder, code int, reason metav1.StatusReason) metav1.Status {
	t.Helper()
	if rec.Code != code {
		t.Fatalf("status code = %d, want %d; body %s", rec.Code, code, rec.Body)
	}
	var st metav1.Status
	decodeJSON(t, rec.Body.Bytes(), &st)
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || st.Reason != reason || st.Code != int32(code) {
		t.Errorf("body = %+v, want a v1 Status Failure %s %d", st, reason, code)
	}
	return st
}

// socketPath is a socket path in a fresh directory short enough for sun_path's 108
// bytes, which t.TempDir() may not be.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sp-api-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "run", "api.sock")
}

// mustRun runs s until the test ends, or until the stop it returns is called, and
// waits until it listens. stop returns Run's error.
func mustRun(t *testing.T, s *Server) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-s.ready:
	case err := <-done:
		done <- err
		t.Fatalf("Run returned before listening: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not listen within 10s")
	}
	return stop
}

// unixClient is an HTTP client that reaches the API over its socket.
func unixClient(t *testing.T, path string) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// get answers a request over a real connection; the body is read whole.
func get(t *testing.T, c *http.Client, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s %s: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, body
}

func pod(namespace, name string, phase corev1.PodPhase, containers ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name)},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c, Ready: phase == corev1.PodRunning,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		})
	}
	return p
}
