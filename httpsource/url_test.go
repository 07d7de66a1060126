package httpsource

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/manifests"
)

func TestURLSendsHeadersAndNeverLogsThem(t *testing.T) {
	hdr, err := ParseHeaders([]string{"X-Token: s3cret-token", "X-Multi:a", "X-Multi: b", "Host:manifests.example"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var host string
	s := newSite(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		host = r.Host
		mu.Unlock()
		http.Error(w, "denied", http.StatusUnauthorized)
	})
	srv := httptest.NewServer(s)
	defer srv.Close()
	r := runSource(t, &URLSource{URL: srv.URL, Headers: hdr})
	r.awaitFreshPoll(t)

	got := s.lastRequest()
	want := http.Header{"X-Token": {"s3cret-token"}, "X-Multi": {"a", "b"}, "User-Agent": {"staticpod"}}
	for k, v := range want {
		if diff := cmp.Diff(v, got.Values(k)); diff != "" {
			t.Errorf("header %s (-want +got):\n%s", k, diff)
		}
	}
	mu.Lock()
	if host != "manifests.example" {
		t.Errorf("Host = %q, want manifests.example", host)
	}
	mu.Unlock()
	r.noUpdate(t, "401")
	if calls := r.errs.get(); len(calls) != 1 || strings.Contains(calls[0].Error(), "s3cret") {
		t.Errorf("failure reports = %v, want one, without the token", calls)
	}
	if strings.Contains(r.logs.String(), "s3cret") {
		t.Errorf("a header value was logged:\n%s", r.logs)
	}
}

func TestParseHeadersRefusesBadFlagsWithoutEchoingValues(t *testing.T) {
	for _, flag := range []string{"Authorization Bearer s3cret", ": s3cret", "Bad Key: s3cret", "X-A: s3cret\r\nX-B: x"} {
		_, err := ParseHeaders([]string{"X-Ok: 1", flag})
		if err == nil {
			t.Errorf("ParseHeaders(%q) = nil error, want one", flag)
			continue
		}
		if !strings.Contains(err.Error(), "#2") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseHeaders(%q) = %v, want an error naming flag #2 without its value", flag, err)
		}
	}
}

func TestURLNotModifiedSendsNothing(t *testing.T) {
	for _, tc := range []struct{ name, etag, lastModified, header string }{
		{"ETag", `"v1"`, "", "If-None-Match"},
		{"Last-Modified", "", "Mon, 02 Jan 2006 15:04:05 GMT", "If-Modified-Since"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var notModified atomic.Int32
			answer := body(pod("web", "busybox:1"), tc.etag, tc.lastModified)
			s := newSite(func(w http.ResponseWriter, r *http.Request) {
				rec := httptest.NewRecorder()
				answer(rec, r)
				if rec.Code == http.StatusNotModified {
					notModified.Add(1)
				}
				answer(w, r)
			})
			srv := httptest.NewServer(s)
			defer srv.Close()
			r := runSource(t, &URLSource{URL: srv.URL})
			first := r.awaitUpdate(t, "start")
			if diff := cmp.Diff([]string{"web-node1"}, podNames(first)); diff != "" {
				t.Fatalf("first snapshot (-want +got):\n%s", diff)
			}
			r.awaitFreshPoll(t)
			r.awaitFreshPoll(t)
			r.noUpdate(t, "304s")
			if got := s.lastRequest().Get(tc.header); got == "" {
				t.Errorf("request without %s: %v", tc.header, s.lastRequest())
			}
			if notModified.Load() < 2 {
				t.Errorf("%d answers were 304, want every poll after the first", notModified.Load())
			}
			if r.logs.count("WARN manifest URL failing") != 0 || len(r.errs.get()) != 0 {
				t.Errorf("a 304 was reported as a failure:\n%s", r.logs)
			}
		})
	}
}

func TestURLChangedBodySendsNewPods(t *testing.T) {
	s := newSite(body(pod("web", "busybox:1"), "", ""))
	srv := httptest.NewServer(s)
	defer srv.Close()
	r := runSource(t, &URLSource{URL: srv.URL})
	first := r.awaitUpdate(t, "start")

	r.awaitFreshPoll(t)
	r.noUpdate(t, "an identical body")
	s.set(body("# same pods, new comment\n"+pod("web", "busybox:1"), "", ""))
	r.awaitFreshPoll(t)
	r.noUpdate(t, "a body with the same pods")

	s.set(body(pod("web", "busybox:2"), "", ""))
	second := r.awaitUpdate(t, "a changed body")
	if diff := cmp.Diff([]string{"busybox:2"}, images(second)); diff != "" {
		t.Fatalf("images (-want +got):\n%s", diff)
	}
	if first.Pods[0].UID == second.Pods[0].UID {
		t.Errorf("UID %s did not change with the spec", first.Pods[0].UID)
	}
	p := second.Pods[0]
	if p.Annotations[manifests.AnnotationSource] != manifests.SourceHTTP || p.Annotations[manifests.AnnotationLocation] != srv.URL {
		t.Errorf("annotations = %v, want source http at %s", p.Annotations, srv.URL)
	}
}

func TestURLEmptyBodyRemovesPods(t *testing.T) {
	for name, empty := range map[string]string{
		"empty":      "",
		"comment":    "# nothing here\n",
		"empty list": `{"apiVersion": "v1", "kind": "List", "items": []}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := newSite(body(pod("a", "busybox:1")+"---\n"+pod("b", "busybox:1"), "", ""))
			srv := httptest.NewServer(s)
			defer srv.Close()
			r := runSource(t, &URLSource{URL: srv.URL})
			if got := podNames(r.awaitUpdate(t, "start")); len(got) != 2 {
				t.Fatalf("first snapshot = %v, want two pods", got)
			}
			s.set(body(empty, "", ""))
			if got := r.awaitUpdate(t, "an empty body"); len(got.Pods) != 0 {
				t.Errorf("snapshot = %v, want no pods", podNames(got))
			}
			if calls := r.errs.get(); len(calls) != 0 {
				t.Errorf("an empty body reported as a failure: %v", calls)
			}
		})
	}
}

func TestURLFailuresKeepTheLastGoodSnapshot(t *testing.T) {
	good := pod("web", "busybox:1")
	s := newSite(body(good, `"good"`, ""))
	srv := serve(listen(t, "127.0.0.1:0"), s)
	addr := srv.Listener.Addr().String()
	r := runSource(t, &URLSource{URL: srv.URL})
	r.awaitUpdate(t, "start")

	steps := []struct {
		name    string
		answer  http.HandlerFunc
		err     string
		invalid bool // a manifest error, counted as such
	}{
		{"500", status(http.StatusInternalServerError), "500 Internal Server Error", false},
		{"garbage", body("{{{ not yaml", "", ""), "invalid manifest", true},
		{"invalid pod", body(pod("web", ""), "", ""), "spec.containers[0].image", true},
		{"server down", nil, "connection refused", false},
	}
	for i, step := range steps {
		if step.answer != nil {
			s.set(step.answer)
		} else {
			srv.Close()
		}
		r.awaitFreshPoll(t)
		r.awaitFreshPoll(t) // the same failure again: silent
		r.noUpdate(t, step.name)
		calls := r.errs.get()
		if len(calls) != i+1 || calls[i] == nil || !strings.Contains(calls[i].Error(), step.err) {
			t.Fatalf("after %s: failure reports = %v, want %d, the last with %q", step.name, calls, i+1, step.err)
		}
		if f := calls[i].(*failure); f.invalid != step.invalid {
			t.Errorf("after %s: reported as a manifest error: %v, want %v", step.name, f.invalid, step.invalid)
		}
		if n := r.logs.count("WARN manifest URL failing"); n != i+1 {
			t.Fatalf("after %s: %d failure lines, want %d (one per distinct error):\n%s", step.name, n, i+1, r.logs)
		}
	}

	s.set(body(good, `"good"`, ""))
	srv = serve(listen(t, addr), s)
	defer srv.Close()
	calls := r.awaitCalls(t, len(steps)+1)
	if calls[len(steps)] != nil {
		t.Fatalf("failure report %v on recovery, want none", calls[len(steps)])
	}
	r.awaitFreshPoll(t)
	r.noUpdate(t, "recovery with the last good body")
	if n := r.logs.count("INFO manifest URL answers again"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, r.logs)
	}
	if n, calls := r.logs.count("WARN manifest URL failing"), r.errs.get(); n != len(steps) || len(calls) != len(steps)+1 {
		t.Errorf("%d WARN lines and %d failure reports, want %d and %d:\n%s", n, len(calls), len(steps), len(steps)+1, r.logs)
	}
}

func TestURLRefusesALargeBody(t *testing.T) {
	big := pod("web", "busybox:1") + "# " + strings.Repeat("x", 200) + "\n"
	chunked := func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, big[:50])
		w.(http.Flusher).Flush() // no Content-Length: the cap must hold while reading
		fmt.Fprint(w, big[50:])
	}
	for name, answer := range map[string]http.HandlerFunc{"Content-Length": body(big, "", ""), "chunked": chunked} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(answer)
			defer srv.Close()
			r := runSource(t, &URLSource{URL: srv.URL, MaxBytes: 100})
			r.awaitFreshPoll(t)
			r.noUpdate(t, "a body over MaxBytes")
			if calls := r.errs.get(); len(calls) != 1 || !strings.Contains(calls[0].Error(), "too large") {
				t.Errorf("failure reports = %v, want one: body too large", calls)
			}
		})
	}
}

func TestURLFollowsAtMostFiveRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.PathValue("n"), &n)
		if n == 0 {
			fmt.Fprint(w, pod("web", "busybox:1"))
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	five := runSource(t, &URLSource{URL: srv.URL + "/hop/5"})
	if got := podNames(five.awaitUpdate(t, "5 redirects")); len(got) != 1 {
		t.Errorf("snapshot after 5 redirects = %v, want one pod", got)
	}
	six := runSource(t, &URLSource{URL: srv.URL + "/hop/6"})
	six.awaitFreshPoll(t)
	six.noUpdate(t, "6 redirects")
	if calls := six.errs.get(); len(calls) != 1 || !strings.Contains(calls[0].Error(), "stopped after 5 redirects") {
		t.Errorf("failure reports = %v, want one: stopped after 5 redirects", calls)
	}
}

func TestURLTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	r := runSource(t, &URLSource{URL: srv.URL, Timeout: 50 * time.Millisecond})
	calls := r.awaitCalls(t, 1)
	r.noUpdate(t, "a timeout")
	if !strings.Contains(calls[0].Error(), "Timeout") {
		t.Errorf("failure report (%v), want a timeout", calls[0])
	}
}

func TestURLTrustsTheCAFile(t *testing.T) {
	srv := httptest.NewUnstartedServer(body(pod("web", "busybox:1"), "", ""))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused below
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	block := &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}
	if err := os.WriteFile(ca, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}

	trusted := runSource(t, &URLSource{URL: srv.URL, CAFile: ca})
	if got := podNames(trusted.awaitUpdate(t, "https with the CA file")); len(got) != 1 {
		t.Errorf("snapshot = %v, want one pod", got)
	}
	untrusted := runSource(t, &URLSource{URL: srv.URL})
	untrusted.awaitFreshPoll(t)
	untrusted.noUpdate(t, "https without the CA")
	if calls := untrusted.errs.get(); len(calls) != 1 || !strings.Contains(calls[0].Error(), "certificate") {
		t.Errorf("failure reports = %v, want one certificate error", calls)
	}
}

func TestURLRunRefusesAnUnusableConfiguration(t *testing.T) {
	emit := func(context.Context, manifests.Update) error { return nil }
	for _, src := range []*URLSource{
		{URL: "ftp://example/pods"},
		{URL: "not a url"},
		{URL: "https://127.0.0.1/", CAFile: filepath.Join(t.TempDir(), "missing.pem")},
	} {
		if err := src.Run(context.Background(), emit); err == nil {
			t.Errorf("Run(%q, CA %q) = nil, want an error", src.URL, src.CAFile)
		}
	}
}

func TestURLKeepsCredentialsOutOfLogsAndPods(t *testing.T) {
	s := newSite(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, _ := r.BasicAuth(); user != "fleet" || pass != "pw-s3cret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, pod("web", "busybox:1"))
	})
	srv := httptest.NewServer(s)
	defer srv.Close()
	withUser := strings.Replace(srv.URL, "http://", "http://fleet:pw-s3cret@", 1)
	r := runSource(t, &URLSource{URL: withUser})
	u := r.awaitUpdate(t, "start")
	if got := u.Pods[0].Annotations[manifests.AnnotationLocation]; got != srv.URL {
		t.Errorf("location = %q, want %q", got, srv.URL)
	}
	s.set(status(http.StatusForbidden))
	r.awaitFreshPoll(t)
	if log := r.logs.String(); strings.Contains(log, "s3cret") || strings.Contains(log, "fleet") || !strings.Contains(log, srv.URL) {
		t.Errorf("the log should name %s without credentials:\n%s", srv.URL, log)
	}
}

// A token in the URL's query (?token=...) is sent, and never shown: the pods' location,
// the log and the failures the source reports have every query value redacted, the keys
// kept.
func TestURLKeepsQueryTokensOutOfLogsAndPods(t *testing.T) {
	s := newSite(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("token") != "s3cret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, pod("web", "busybox:1"))
	})
	srv := httptest.NewServer(s)
	defer srv.Close()
	raw := srv.URL + "/pods?node=n1&token=s3cret&debug"
	r := runSource(t, &URLSource{URL: raw})
	u := r.awaitUpdate(t, "start")
	want := srv.URL + "/pods?node=REDACTED&token=REDACTED&REDACTED"
	if got := u.Pods[0].Annotations[manifests.AnnotationLocation]; got != want {
		t.Errorf("location = %q, want %q", got, want)
	}
	// The UID is the one the URL as written gives, as before the query was redacted:
	// an upgrade restarts no pod.
	asWritten := manifests.Load([]byte(pod("web", "busybox:1")), manifests.Options{NodeName: "node1", Source: manifests.Source{Kind: manifests.SourceHTTP, Location: raw}})
	if len(asWritten.Pods) != 1 {
		t.Fatalf("loading the pod: %v", asWritten.Errors)
	}
	if got, want := u.Pods[0].UID, asWritten.Pods[0].UID; got != want {
		t.Errorf("UID = %s, want %s, the UID of the URL as written", got, want)
	}
	s.set(status(http.StatusForbidden))
	calls := r.awaitCalls(t, 1)
	if log := r.logs.String(); strings.Contains(log, "s3cret") || !strings.Contains(log, want) {
		t.Errorf("the log should name %s, without the token:\n%s", want, log)
	}
	if len(calls) != 1 || strings.Contains(calls[0].Error(), "s3cret") {
		t.Errorf("failure reports = %v, want one, without the token", calls)
	}
}

func TestPublicURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://h/pods":                          "https://h/pods",
		"https://h/pods?":                         "https://h/pods?",
		"https://h/pods?debug":                    "https://h/pods?REDACTED",
		"https://h/m.yaml?s3cr3t":                 "https://h/m.yaml?REDACTED",
		"https://h/pods#s3cr3t":                   "https://h/pods#REDACTED",
		"https://h/pods?token=":                   "https://h/pods?token=",
		"https://h/p%20ods?token=a%26b&x=1#frag":  "https://h/p%20ods?token=REDACTED&x=REDACTED#REDACTED",
		"https://u:pw@h/pods":                     "https://h/pods",
		"https://u:pw@h/pods?sig=abc&sig=def&n=2": "https://h/pods?sig=REDACTED&sig=REDACTED&n=REDACTED",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := publicURL(u, raw); got != want {
			t.Errorf("publicURL(%s) = %s, want %s", raw, got, want)
		}
	}
}

// A manifest URL served over https is never followed to plain http: what runs as root
// must not come from where anyone on the path can change it.
func TestURLRefusesRedirectToPlainHTTP(t *testing.T) {
	plain := httptest.NewServer(body(pod("web", "busybox:1"), "", ""))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL, http.StatusFound)
	}))
	defer secure.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runSource(t, &URLSource{URL: secure.URL, CAFile: ca})
	r.awaitFreshPoll(t)
	r.noUpdate(t, "a redirect from https to http")
	if calls := r.errs.get(); len(calls) != 1 || !strings.Contains(calls[0].Error(), "refused a redirect from https to http") {
		t.Errorf("failure reports = %v, want one: refused a redirect from https to http", calls)
	}
	if n := r.logs.count("plain http"); n != 0 {
		t.Errorf("an https URL was warned about as plain http:\n%s", r.logs)
	}
	direct := runSource(t, &URLSource{URL: plain.URL})
	direct.awaitUpdate(t, "a plain http URL")
	if n := direct.logs.count("WARN the manifest URL is plain http"); n != 1 {
		t.Errorf("%d warnings that the URL is plain http, want 1:\n%s", n, direct.logs)
	}
}
