package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/httpsource"
	"github.com/staticpod/staticpod/logs"
)

// fuzzToken is the bearer token of FuzzAPI's TCP listener.
const fuzzToken = "s3cret-token"

// storedFile is what may appear in the push store's directory: manifests under their
// DNS-1123 names, and the temp files of a write in progress.
var storedFile = regexp.MustCompile(`^(\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?\.yaml(\.tmp-?[0-9]*)?$|^\.tmp`)

// FuzzAPI sends any request to every endpoint, over the socket's handler and through
// the TCP listener's token check, against a fake runner and a real push store: nothing
// may panic or answer 500, every failure must be a v1 Status, a request without the
// token must change nothing over TCP, and the store must write nothing but its own
// manifest files in its own directory.
func FuzzAPI(f *testing.F) {
	seeds := []struct {
		method, target, body string
	}{
		{"GET", "/healthz", ""},
		{"GET", "/readyz?verbose=1", ""},
		{"GET", "/pods", ""},
		{"GET", "/pods/default/web-node1", ""},
		{"GET", "/pods/..%2f../x", ""},
		{"GET", "/containerLogs/default/web-node1/nginx?tailLines=1&previous=true", ""},
		{"GET", "/containerLogs/default/web-node1/nginx?follow=true&tailLines=-1&timestamps=true", ""},
		{"GET", "/containerLogs/default/web-node1/sidecar?previous=1&tailLines=99999999999999999999", ""},
		{"GET", "/events?follow=true&pod=default/web-node1", ""},
		{"GET", "/images", ""},
		{"GET", "/metrics", ""},
		{"GET", "/manifests", ""},
		{"GET", "/manifests/web", ""},
		{"PUT", "/manifests/web", "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c, image: busybox}]}\n"},
		{"PUT", "/manifests/..%2F..%2Fetc%2Fx", "kind: Pod"},
		{"PUT", "/manifests/a", "a: &a [*a, *a, *a]\nb: &b [*a, *a, *a, *a]\n"},
		{"DELETE", "/manifests/web", ""},
		{"POST", "/pods", "{}"},
		{"GET", "//pods/../manifests", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.target, []byte(s.body), false, "")
		f.Add(s.method, s.target, []byte(s.body), true, "Bearer "+fuzzToken)
	}
	f.Add("PUT", "/manifests/web", []byte("kind: Pod"), true, "bearer  "+fuzzToken+" ")
	f.Add("DELETE", "/manifests/web", []byte{}, true, "Basic "+fuzzToken)

	logDir := f.TempDir()
	pods := runnerPods()
	for attempt, line := range []string{"first\n", "second\n", "third\n"} {
		path := logs.ContainerPath(logDir, "default", "web-node1", "uid-web-node1", "nginx", attempt)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			f.Fatal(err)
		}
		rec := "2026-01-01T00:00:00Z stdout F " + line
		if err := os.WriteFile(path, []byte(rec+"2026-01-01T00:00:01Z stdout P part\n\xff\x00 garbage\n"), 0o600); err != nil {
			f.Fatal(err)
		}
	}
	tokenFile := filepath.Join(f.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(fuzzToken+"\n"), 0o600); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, method, target string, body []byte, tcp bool, auth string) {
		root := t.TempDir()
		storeDir := filepath.Join(root, "manifests")
		store, err := httpsource.NewPush(storeDir, testNode, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := newFakeBackend(pods...)
		b.setReady("file")
		b.setReady("api")
		cfg := Config{Backend: b, Store: store, PodLogDir: logDir, Sources: []string{"file", "api"}, Images: fakeImages{}, Log: testLogger()}
		if tcp {
			cfg.TokenFile = tokenFile
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := s.Handler()
		if tcp {
			h = s.tcpGuard(s.mux)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond) // follow streams end
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, "http://staticpod"+target, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		before := store.List()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		if rec.Code >= 500 {
			t.Errorf("%s %s = %d %s", method, target, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			var st metav1.Status
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || st.Kind != "Status" || st.Code != int32(rec.Code) {
				t.Errorf("%s %s = %d with a body that is not its v1 Status: %s", method, target, rec.Code, rec.Body)
			}
		}
		authorized := len(auth) > 7 && strings.EqualFold(auth[:7], "Bearer ") && strings.TrimSpace(auth[7:]) == fuzzToken
		if tcp && !authorized {
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("%s %s over TCP with Authorization %q = %d, want 401", method, target, auth, rec.Code)
			}
			if after := store.List(); len(after) != len(before) {
				t.Errorf("%s %s over TCP without the token changed the store: %v -> %v", method, target, before, after)
			}
		}
		entries, err := os.ReadDir(root)
		if err != nil || len(entries) != 1 || entries[0].Name() != "manifests" {
			t.Errorf("after %s %s the store's parent holds %v (%v), want only its directory", method, target, entries, err)
		}
		stored, _ := os.ReadDir(storeDir)
		for _, e := range stored {
			if !storedFile.MatchString(e.Name()) || e.IsDir() {
				t.Errorf("after %s %s the store holds %q", method, target, e.Name())
			}
		}
	})
}
