package api

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner/events"
)

func TestSocketIsPrivateAndRemovedAtStop(t *testing.T) {
	cfg := testConfig(newFakeBackend(runnerPods()...), nil)
	cfg.Socket = socketPath(t)
	s := mustNew(t, cfg)
	stop := mustRun(t, s)

	dir, err := os.Stat(filepath.Dir(cfg.Socket))
	if err != nil || dir.Mode().Perm() != socketDirMode {
		t.Errorf("socket directory: %v, mode %v; want it created %v", err, dir.Mode().Perm(), fs.FileMode(socketDirMode))
	}
	info, err := os.Lstat(cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Type() != fs.ModeSocket || info.Mode().Perm() != socketMode {
		t.Errorf("socket mode = %v, want a socket with mode %v", info.Mode(), fs.FileMode(socketMode))
	}
	st := info.Sys().(*syscall.Stat_t)
	if st.Uid != uint32(os.Getuid()) || os.Getuid() == 0 && st.Uid != 0 {
		t.Errorf("socket owner = %d, want %d (root when run as root)", st.Uid, os.Getuid())
	}
	entries, _ := os.ReadDir(filepath.Dir(cfg.Socket))
	if len(entries) != 1 {
		t.Errorf("socket directory holds %d entries, want only the socket: %v", len(entries), entries)
	}

	c := unixClient(t, cfg.Socket)
	req, _ := http.NewRequest(http.MethodGet, "http://staticpod/pods/default/web-node1", nil)
	if code, body := get(t, c, req); code != http.StatusOK || !strings.Contains(string(body), `"name":"web-node1"`) {
		t.Errorf("GET over the socket = %d %s", code, body)
	}

	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Lstat(cfg.Socket); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Run returned the socket is still there: %v", err)
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	path := socketPath(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	dead, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	dead.SetUnlinkOnClose(false)
	dead.Close() // the socket file stays, nobody answers on it

	cfg := testConfig(newFakeBackend(), nil)
	cfg.Socket = path
	mustRun(t, mustNew(t, cfg))
	req, _ := http.NewRequest(http.MethodGet, "http://staticpod/healthz", nil)
	if code, body := get(t, unixClient(t, path), req); code != http.StatusOK {
		t.Errorf("GET /healthz on the replaced socket = %d %s", code, body)
	}
}

func TestSocketOfALiveServerOrNotASocketIsRefused(t *testing.T) {
	cfg := testConfig(newFakeBackend(), nil)
	cfg.Socket = socketPath(t)
	mustRun(t, mustNew(t, cfg))
	err := mustNew(t, cfg).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "another server answers") {
		t.Errorf("second server on a live socket: Run = %v, want another server answers", err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://staticpod/healthz", nil)
	if code, _ := get(t, unixClient(t, cfg.Socket), req); code != http.StatusOK {
		t.Errorf("the first server stopped answering: %d", code)
	}

	file := filepath.Join(t.TempDir(), "not-a-socket")
	os.WriteFile(file, []byte("keep me"), 0o600)
	cfg.Socket = file
	err = mustNew(t, cfg).Run(context.Background())
	if data, _ := os.ReadFile(file); err == nil || !strings.Contains(err.Error(), "not a socket") || string(data) != "keep me" {
		t.Errorf("socket path on a regular file: Run = %v, file %q; want not a socket and the file kept", err, data)
	}
}

// tcpServer runs a server on the socket and 127.0.0.1 with the token (none when empty)
// and returns the TCP base URL and the socket path.
func tcpServer(t *testing.T, token string) (base, socket string) {
	t.Helper()
	base, socket, _ = tcpServerLogged(t, token)
	return base, socket
}

// tcpServerLogged is tcpServer, with what the server logs.
func tcpServerLogged(t *testing.T, token string) (base, socket string, log *testenv.Buffer) {
	t.Helper()
	log = &testenv.Buffer{}
	cfg := testConfig(newFakeBackend(runnerPods()...), newFakeStore())
	cfg.Log = slog.New(slog.NewTextHandler(log, nil))
	cfg.Socket = socketPath(t)
	cfg.Listen = "127.0.0.1:0"
	if token != "" {
		cfg.TokenFile = filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(cfg.TokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := mustNew(t, cfg)
	mustRun(t, s)
	return "http://" + s.tcpAddr.String(), cfg.Socket, log
}

func request(t *testing.T, method, url, token, body string) *http.Request {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

func TestTCPNeedsTheToken(t *testing.T) {
	base, socket := tcpServer(t, "s3cret")
	c := &http.Client{Timeout: 10 * time.Second}
	tests := []struct {
		name, method, path, token string
		code                      int
	}{
		{"no token", http.MethodGet, "/pods", "", http.StatusUnauthorized},
		{"wrong token", http.MethodGet, "/pods", "s3cre", http.StatusUnauthorized},
		{"no token, health", http.MethodGet, "/healthz", "", http.StatusUnauthorized},
		{"right token", http.MethodGet, "/pods", "s3cret", http.StatusOK},
		{"no token, profiles", http.MethodGet, "/debug/pprof/cmdline", "", http.StatusUnauthorized},
		{"right token, profiles", http.MethodGet, "/debug/pprof/cmdline", "s3cret", http.StatusOK},
		{"right token, write", http.MethodPut, "/manifests/web", "s3cret", http.StatusOK},
		{"wrong token, write", http.MethodDelete, "/manifests/web", "nope", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		code, body := get(t, c, request(t, tt.method, base+tt.path, tt.token, validManifest))
		if code != tt.code {
			t.Errorf("%s: %s %s = %d %s, want %d", tt.name, tt.method, tt.path, code, body, tt.code)
		}
		if code == http.StatusUnauthorized {
			var st metav1.Status
			decodeJSON(t, body, &st)
			if st.Reason != metav1.StatusReasonUnauthorized {
				t.Errorf("%s: 401 body = %s, want a Status of reason Unauthorized", tt.name, body)
			}
		}
	}
	code, body := get(t, unixClient(t, socket), request(t, http.MethodGet, "http://staticpod/pods", "", ""))
	if code != http.StatusOK {
		t.Errorf("the socket asks for no token: GET /pods = %d %s", code, body)
	}
}

func TestTCPWithoutTokenServesOnlyWhatTheKubeletsReadOnlyPortServes(t *testing.T) {
	base, socket, log := tcpServerLogged(t, "")
	if !strings.Contains(log.String(), "level=WARN msg=\"the TCP listener has no --api-token-file: it serves /healthz, /readyz, /metrics and /pods") {
		t.Errorf("no warning saying what TCP serves to anyone:\n%s", log)
	}
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/healthz", http.StatusOK},
		{http.MethodGet, "/readyz", http.StatusOK},
		{http.MethodGet, "/readyz/pods", http.StatusOK},
		{http.MethodGet, "/metrics", http.StatusOK},
		{http.MethodGet, "/pods", http.StatusOK},
		{http.MethodGet, "/pods/", http.StatusOK},
		{http.MethodHead, "/pods", http.StatusOK},
		{http.MethodGet, "/pods/default/web-node1", http.StatusOK},
		{http.MethodGet, "/containerLogs/default/web-node1/nginx", http.StatusUnauthorized},
		{http.MethodGet, "/events", http.StatusUnauthorized},
		{http.MethodGet, "/events?follow=1", http.StatusUnauthorized},
		{http.MethodGet, "/manifests", http.StatusUnauthorized},
		{http.MethodGet, "/manifests/web", http.StatusUnauthorized},
		{http.MethodGet, "/configmaps", http.StatusUnauthorized},
		{http.MethodGet, "/secrets", http.StatusUnauthorized},
		{http.MethodGet, "/images", http.StatusUnauthorized},
		{http.MethodGet, "/stats/summary", http.StatusUnauthorized},
		{http.MethodGet, "/metrics/resource", http.StatusUnauthorized},
		{http.MethodGet, "/debug/pprof/", http.StatusUnauthorized},
		{http.MethodGet, "/debug/pprof/cmdline", http.StatusUnauthorized},
		{http.MethodGet, "/debug/pprof/goroutine?debug=2", http.StatusUnauthorized},
		{http.MethodPut, "/manifests/web", http.StatusUnauthorized},
		{http.MethodDelete, "/manifests/web", http.StatusUnauthorized},
		{http.MethodPost, "/pods", http.StatusUnauthorized},
		{http.MethodGet, "/nowhere", http.StatusUnauthorized},
		{http.MethodGet, "/pods/../manifests", http.StatusUnauthorized},
		{http.MethodGet, "//manifests", http.StatusUnauthorized},
		{http.MethodGet, "/pods/%2e%2e/manifests/web", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		code, body := get(t, c, request(t, tt.method, base+tt.path, "", validManifest))
		if code != tt.code {
			t.Errorf("%s %s over TCP without a token file = %d %s, want %d", tt.method, tt.path, code, body, tt.code)
		}
		if code == http.StatusUnauthorized && !strings.Contains(string(body), "--api-token-file") {
			t.Errorf("%s %s: 401 body = %s, want it to name --api-token-file", tt.method, tt.path, body)
		}
	}
	code, body := get(t, unixClient(t, socket), request(t, http.MethodPut, "http://staticpod/manifests/web", "", validManifest))
	if code != http.StatusOK {
		t.Errorf("PUT over the socket = %d %s, want 200", code, body)
	}
	for _, path := range []string{"/manifests/web", "/events", "/debug/pprof/cmdline"} {
		if code, body := get(t, unixClient(t, socket), request(t, http.MethodGet, "http://staticpod"+path, "", "")); code != http.StatusOK {
			t.Errorf("GET %s over the socket = %d %s, want 200", path, code, body)
		}
	}
}

func TestWrongTokenWarningsAreRateLimited(t *testing.T) {
	log := &testenv.Buffer{}
	cfg := testConfig(newFakeBackend(runnerPods()...), nil)
	cfg.Log = slog.New(slog.NewTextHandler(log, nil))
	cfg.TokenFile = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(cfg.TokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, cfg)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.wrongToken.now = func() time.Time { return now }
	h := s.tcpGuard(s.mux)
	send := func(auth string) {
		req := httptest.NewRequest(http.MethodGet, "/pods", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("GET /pods with Authorization %q = %d, want 401", auth, rec.Code)
		}
	}
	warnings := func() []string {
		var out []string
		for _, line := range strings.Split(log.String(), "\n") {
			if strings.Contains(line, "wrong bearer token") {
				out = append(out, line)
			}
		}
		return out
	}

	for range 5 {
		send("Bearer guess")
	}
	send("") // no token at all is not a wrong one
	if w := warnings(); len(w) != 1 || !strings.Contains(w[0], "suppressed=0") {
		t.Fatalf("after 5 wrong tokens within a second, warnings = %q, want the first one only", w)
	}
	now = now.Add(wrongTokenWarnEvery - time.Second)
	send("Bearer guess")
	if w := warnings(); len(w) != 1 {
		t.Fatalf("a wrong token within %v of the warning: warnings = %q, want still one", wrongTokenWarnEvery, w)
	}
	now = now.Add(time.Second)
	send("Bearer guess")
	if w := warnings(); len(w) != 2 || !strings.Contains(w[1], "suppressed=5") {
		t.Errorf("a wrong token %v after the first warning: warnings = %q, want a second one counting the 5 held back", wrongTokenWarnEvery, w)
	}
}

func TestStreamsOutliveTimeoutsAndEndAtShutdown(t *testing.T) {
	b := newFakeBackend()
	cfg := testConfig(b, nil)
	cfg.Socket = socketPath(t)
	s := mustNew(t, cfg)
	s.timeouts.read, s.timeouts.write = 200*time.Millisecond, 200*time.Millisecond
	stop := mustRun(t, s)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://staticpod/events?follow=true", nil)
	resp, err := unixClient(t, cfg.Socket).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := readLines(resp.Body)

	// The stream must outlast the connection's read and write timeouts, so this waits
	// past them: a time, not a state, is what is tested.
	<-time.After(3 * s.timeouts.write)
	b.events.Add(events.Record{Type: events.Normal, Reason: "Late"})
	awaitEvent(t, lines, "Late", 1)

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(shutdownGrace / 2):
		t.Fatal("Run did not return promptly with a follow stream open")
	}
	for range lines { // the stream ends
	}
}
