package httpsource

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
)

// The harness of the URL source's tests: a manifest server the test steers, a source
// run with recorders, and waits with deadlines. Waits count polls (URLSource.afterPoll)
// rather than sleeping.

const (
	period  = 20 * time.Millisecond
	awaitUp = 10 * time.Second // deadline for something that must happen
)

func pod(name, image string) string {
	return strings.NewReplacer("NAME", name, "IMAGE", image).Replace("apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec: {containers: [{name: c, image: IMAGE}]}\n")
}

// site is a manifest server whose answer the test changes as it goes. It records the
// headers of every request.
type site struct {
	mu       sync.Mutex
	answer   http.HandlerFunc
	requests []http.Header
}

func newSite(answer http.HandlerFunc) *site {
	return &site{answer: answer}
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Header.Clone())
	answer := s.answer
	s.mu.Unlock()
	answer(w, r)
}

func (s *site) set(answer http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = answer
}

func (s *site) lastRequest() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[len(s.requests)-1]
}

// body answers with a fixed body and optional validators, and 304 when the request's
// validators match them.
func body(content, etag, lastModified string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if etag != "" {
			w.Header().Set("ETag", etag)
			if r.Header.Get("If-None-Match") == etag {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		if lastModified != "" {
			w.Header().Set("Last-Modified", lastModified)
			if r.Header.Get("If-Modified-Since") == lastModified {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		fmt.Fprint(w, content)
	}
}

func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", code) }
}

// logRecorder is a slog handler that keeps every record, for tests to count lines. Its
// derived handlers (With) share its lines.
type logRecorder struct {
	lines *logLines
	attrs []slog.Attr
}

type logLines struct {
	mu    sync.Mutex
	lines []string // "LEVEL msg key=value..."
}

func newLogRecorder() *logRecorder { return &logRecorder{lines: &logLines{}} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{lines: l.lines, attrs: append(append([]slog.Attr(nil), l.attrs...), attrs...)}
}

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	for _, a := range l.attrs {
		line += " " + a.String()
	}
	l.lines.mu.Lock()
	defer l.lines.mu.Unlock()
	l.lines.lines = append(l.lines.lines, line)
	return nil
}

// count returns how many lines start with prefix ("WARN", "INFO manifest URL").
func (l *logRecorder) count(prefix string) int {
	l.lines.mu.Lock()
	defer l.lines.mu.Unlock()
	n := 0
	for _, line := range l.lines.lines {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}

func (l *logRecorder) String() string {
	l.lines.mu.Lock()
	defer l.lines.mu.Unlock()
	return strings.Join(l.lines.lines, "\n")
}

// errorLog records the failures the source reports (its Unchanged updates), as errors:
// nil for a recovery.
type errorLog struct {
	mu    sync.Mutex
	calls []error
}

func (e *errorLog) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, err)
}

func (e *errorLog) get() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.calls...)
}

// running is a URLSource under test: its snapshots, log lines, failure reports and
// finished polls.
type running struct {
	updates chan manifests.Update
	logs    *logRecorder
	errs    *errorLog
	polls   chan struct{}
}

// runSource runs src with a recording logger until the test ends.
func runSource(t *testing.T, src *URLSource) *running {
	t.Helper()
	r := &running{updates: make(chan manifests.Update, 100), logs: newLogRecorder(), errs: &errorLog{}, polls: make(chan struct{}, 10000)}
	src.Log = slog.New(r.logs)
	src.afterPoll = func() {
		select {
		case r.polls <- struct{}{}:
		default:
		}
	}
	if src.Period == 0 {
		src.Period = period
	}
	if src.Node == "" {
		src.Node = "node1"
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- src.Run(ctx, func(ctx context.Context, u manifests.Update) error {
			if u.Source != manifests.SourceHTTP {
				t.Errorf("an update from the URL source says it comes from %q", u.Source)
			}
			if u.Unchanged {
				r.errs.add(failureError(u))
			} else {
				r.updates <- u
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil on cancel", err)
		}
		if t.Failed() {
			t.Logf("source log:\n%s", r.logs)
		}
	})
	return r
}

// awaitFreshPoll returns once a poll that started after the call has been handled, so
// that the source has seen what the server answers now. The first poll to finish may
// have been under way already; the second started after it.
func (r *running) awaitFreshPoll(t *testing.T) {
	t.Helper()
	for drained := false; !drained; {
		select {
		case <-r.polls:
		default:
			drained = true
		}
	}
	deadline := time.After(awaitUp)
	for range 2 {
		select {
		case <-r.polls:
		case <-deadline:
			t.Fatalf("the source did not poll within %s", awaitUp)
		}
	}
}

func (r *running) awaitUpdate(t *testing.T, what string) manifests.Update {
	t.Helper()
	return awaitUpdate(t, r.updates, what)
}

// awaitUpdate returns the next snapshot a source sends, or fails t after awaitUp.
func awaitUpdate(t *testing.T, updates <-chan manifests.Update, what string) manifests.Update {
	t.Helper()
	select {
	case u := <-updates:
		return u
	case <-time.After(awaitUp):
		t.Fatalf("no snapshot after %s", what)
		return manifests.Update{}
	}
}

// noUpdate asserts that nothing was sent; call it after awaitFreshPoll, when any
// snapshot the source meant to send has been sent.
func (r *running) noUpdate(t *testing.T, what string) {
	t.Helper()
	select {
	case u := <-r.updates:
		t.Fatalf("unexpected snapshot after %s: %v", what, podNames(u))
	default:
	}
}

func podNames(u manifests.Update) []string {
	out := []string{}
	for _, p := range u.Pods {
		out = append(out, p.Name)
	}
	return out
}

func images(u manifests.Update) []string {
	var out []string
	for _, p := range u.Pods {
		out = append(out, p.Spec.Containers[0].Image)
	}
	return out
}

// failureError is the failure an Unchanged update reports, as the error it came from.
func failureError(u manifests.Update) error {
	if len(u.Failures) == 0 {
		return nil
	}
	f := u.Failures[0]
	if f.Invalid {
		return &failure{"invalid manifest: " + strings.Join(f.Problems, "; "), true}
	}
	return &failure{strings.Join(f.Problems, "; "), false}
}

// failure is a reported failure; invalid says it was a manifest error.
type failure struct {
	msg     string
	invalid bool
}

func (f *failure) Error() string { return f.msg }

// awaitCalls waits until the source has reported n failures or recoveries.
func (r *running) awaitCalls(t *testing.T, n int) []error {
	t.Helper()
	deadline := time.After(awaitUp)
	for {
		if calls := r.errs.get(); len(calls) >= n {
			return calls
		}
		select {
		case <-r.polls:
		case <-deadline:
			t.Fatalf("failure reports = %v, want %d", r.errs.get(), n)
		}
	}
}

// listen listens on addr, retrying while a just-closed port is still held.
func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	defer func() { // runs as a failed Await ends the test: say why
		if err != nil {
			t.Logf("listen %s: %v", addr, err)
		}
	}()
	testenv.Await(t, "a listener on "+addr, awaitUp, func() bool {
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	return ln
}

func serve(ln net.Listener, h http.Handler) *httptest.Server {
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	srv.Start()
	return srv
}
