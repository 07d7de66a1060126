package httpsource

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A URL that flaps between good answers and every kind of bad one — errors, bodies cut
// short with and without a Content-Length, garbage, answers slower than the timeout,
// connections dropped — never takes a pod away: every snapshot sent holds the good
// pods, whole, and the failures only ever come as Unchanged updates.
func TestChaosURLNeverDropsPods(t *testing.T) {
	good := pod("a", "busybox:1") + "---\n" + pod("b", "busybox:1") + "---\n" + pod("c", "busybox:1")
	cut := good[:len(good)*2/3] // still YAML, with a pod less: taken whole, it would remove c
	answers := []struct {
		name   string
		answer http.HandlerFunc
	}{
		{"good", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, good) }},
		{"500", status(http.StatusInternalServerError)},
		{"cut short of its Content-Length", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(good)))
			fmt.Fprint(w, cut)
			w.(http.Flusher).Flush()
			hijackClose(w)
		}},
		{"chunked, cut short", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, cut)
			w.(http.Flusher).Flush() // chunked: the connection ends without the last chunk
			hijackClose(w)
		}},
		{"garbage", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("\x00\xff\xfe{{{ [[[ \x1b")) }},
		{"slower than the timeout", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		}},
		{"dropped", func(w http.ResponseWriter, r *http.Request) { hijackClose(w) }},
		{"good again", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, good) }},
	}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answers[int(n.Add(1)-1)%len(answers)].answer(w, r)
	}))
	defer srv.Close()
	r := runSource(t, &URLSource{URL: srv.URL, Period: 5 * time.Millisecond, Timeout: 200 * time.Millisecond})

	first := r.awaitUpdate(t, "the first good answer")
	var want []types.UID
	for _, p := range first.Pods {
		want = append(want, p.UID)
	}
	if len(want) != 3 {
		t.Fatalf("first snapshot: %d pods, want 3", len(want))
	}
	deadline := time.After(awaitUp)
	for n.Load() < int64(5*len(answers)) { // five rounds of every answer
		select {
		case u := <-r.updates:
			var got []types.UID
			for _, p := range u.Pods {
				got = append(got, p.UID)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("after %d answers a snapshot with pods %v, want always %v", n.Load(), got, want)
			}
		case <-r.polls:
		case <-deadline:
			t.Fatalf("the source polled only %d times within %s", n.Load(), awaitUp)
		}
	}
	var kinds []string
	for _, err := range r.errs.get() {
		if err != nil {
			kinds = append(kinds, err.Error())
		}
	}
	for _, want := range []string{"500 Internal Server Error", "unexpected EOF", "invalid manifest", "Client.Timeout", "EOF"} {
		if !slices.ContainsFunc(kinds, func(k string) bool { return strings.Contains(k, want) }) {
			t.Errorf("no failure reported with %q among %q", want, kinds)
		}
	}
}

// hijackClose closes the connection under a handler, as a server that dies does.
func hijackClose(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		conn.Close()
	}
}
