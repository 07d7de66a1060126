// Package apitest serves a fake of staticpod's API on a unix socket, for the tests of its
// clients (package api/client and the commands of package cli): the read endpoints
// /readyz/pods, /pods, /pods/{namespace}/{name}, /events, /containerLogs/... and
// /stats/summary, answered from objects the test sets, and a record of what was asked
// that a test can wait on. Like the clients it serves, it links no runner: the types of
// the answers are package wire's (and the kubelet's stats/v1alpha1).
package apitest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpod/staticpod/api/wire"
)

// Log is what the fake answers for the log of any container.
const Log = "line 1\nline 2\n"

// Server is the fake API. Its methods are safe while it serves.
type Server struct {
	Socket string // the unix socket it serves on

	mu       sync.Mutex // guards pods, events, unready, requests and next
	pods     []corev1.Pod
	events   []wire.Event
	unready  string // what /readyz/pods answers 503; "" for ready
	requests []string
	next     []awaited         // channels closed at the next request for their path
	summary  *statsapi.Summary // what /stats/summary answers; nil: 404, as a daemon without a sampler
}

// NewServer serves pods on a socket under t's temporary directory until t ends. A pod it
// does not hold is answered 404 with a metav1.Status, as the daemon does.
func NewServer(t testing.TB, pods []corev1.Pod) *Server {
	t.Helper()
	s := &Server{Socket: filepath.Join(t.TempDir(), "api.sock"), pods: pods}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz/pods", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		unready := s.unready
		s.mu.Unlock()
		s.note(r)
		w.Header().Set("Content-Type", "text/plain")
		if unready != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, unready)
			return
		}
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
		pods := s.servedPods() // before NextRequest's channel closes: SetPods after it is seen by the next list
		s.note(r)
		writeJSON(w, http.StatusOK, corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: pods})
	})
	mux.HandleFunc("GET /pods/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.note(r)
		for _, p := range s.servedPods() {
			if p.Namespace == r.PathValue("namespace") && p.Name == r.PathValue("name") {
				writeJSON(w, http.StatusOK, p)
				return
			}
		}
		writeJSON(w, http.StatusNotFound, metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound, Message: fmt.Sprintf("pods %q not found", r.PathValue("name"))})
	})
	mux.HandleFunc("GET /containerLogs/{namespace}/{name}/{container}", func(w http.ResponseWriter, r *http.Request) {
		s.note(r)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, Log)
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		s.note(r)
		s.mu.Lock()
		events := s.events
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, events)
	})
	mux.HandleFunc("GET /stats/summary", func(w http.ResponseWriter, r *http.Request) {
		s.note(r)
		s.mu.Lock()
		sum := s.summary
		s.mu.Unlock()
		if sum == nil {
			writeJSON(w, http.StatusNotFound, metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
				Reason: metav1.StatusReasonNotFound, Message: "usage statistics are not enabled on this server"})
			return
		}
		writeJSON(w, http.StatusOK, sum)
	})
	l, err := net.Listen("unix", s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return s
}

// SetSummary sets what /stats/summary answers.
func (s *Server) SetSummary(sum *statsapi.Summary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.summary = sum
}

// SetPods changes the pods the fake serves.
func (s *Server) SetPods(pods []corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods = pods
}

// SetEvents sets the events /events answers, whatever pod is asked for.
func (s *Server) SetEvents(events []wire.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = events
}

// SetUnready makes /readyz/pods answer 503 with msg ("sources not ready: file"), or 200
// again when msg is "".
func (s *Server) SetUnready(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unready = msg
}

// awaited is a channel of NextRequest and the path it waits for.
type awaited struct {
	path string
	c    chan struct{}
}

// NextRequest returns a channel closed once the fake has received, after this call, a
// request for path: /pods and /readyz/pods have then read what they answer, which a SetPods
// or SetUnready after the close does not change.
func (s *Server) NextRequest(path string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(chan struct{})
	s.next = append(s.next, awaited{path, c})
	return c
}

// LastRequest is the path and query of the last request.
func (s *Server) LastRequest() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return ""
	}
	return s.requests[len(s.requests)-1]
}

func (s *Server) servedPods() []corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods
}

func (s *Server) note(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.URL.RequestURI())
	waiting := s.next[:0]
	for _, a := range s.next {
		if a.path == r.URL.Path {
			close(a.c)
		} else {
			waiting = append(waiting, a)
		}
	}
	s.next = waiting
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
