package api

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/logs"
)

// writeCRILog writes records to a container attempt's log file, as the logger would.
func writeCRILog(t *testing.T, dir string, p *corev1.Pod, container string, attempt int, records ...string) string {
	t.Helper()
	path := logs.ContainerPath(dir, p.Namespace, p.Name, string(p.UID), container, attempt)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, r := range records {
		if _, err := f.WriteString(r + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// logServer serves runnerPods with logs of web-node1's containers: nginx has restarted
// twice, so attempts 1 and 2 have logs; setup (an init container) has attempt 0's.
func logServer(t *testing.T) (*Server, string, *corev1.Pod) {
	t.Helper()
	pods := runnerPods()
	web := pods[0]
	dir := t.TempDir()
	writeCRILog(t, dir, web, "nginx", 1, "2026-01-01T00:00:00.000000000Z stdout F crashed before")
	writeCRILog(t, dir, web, "nginx", 2,
		"2026-01-01T00:00:00.000000000Z stdout F one",
		"2026-01-01T00:00:01.000000000Z stderr F two",
		"2026-01-01T00:00:02.000000000Z stdout P thr",
		"2026-01-01T00:00:02.500000000Z stdout F ee")
	writeCRILog(t, dir, web, "setup", 0, "2026-01-01T00:00:00.000000000Z stdout F set up")
	cfg := testConfig(newFakeBackend(pods...), nil)
	cfg.PodLogDir = dir
	return mustNew(t, cfg), dir, web
}

func TestContainerLogs(t *testing.T) {
	s, _, _ := logServer(t)
	tests := []struct{ query, want string }{
		{"", "one\ntwo\nthree\n"},
		{"?tailLines=2", "two\nthree\n"},
		{"?tailLines=0", ""},
		{"?stream=stderr", "two\n"},
		{"?tailLines=1&timestamps=true", "2026-01-01T00:00:02.000000000Z three\n"},
		{"?previous=true", "crashed before\n"},
	}
	for _, tt := range tests {
		rec := serve(t, s.Handler(), http.MethodGet, "/containerLogs/default/web-node1/nginx"+tt.query, nil)
		if rec.Code != http.StatusOK || rec.Body.String() != tt.want {
			t.Errorf("GET nginx logs%s = %d %q, want 200 %q", tt.query, rec.Code, rec.Body, tt.want)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Errorf("GET nginx logs%s Content-Type = %q", tt.query, ct)
		}
	}
	rec := serve(t, s.Handler(), http.MethodGet, "/containerLogs/default/web-node1/setup", nil)
	if rec.Code != http.StatusOK || rec.Body.String() != "set up\n" {
		t.Errorf("GET init container logs = %d %q, want 200 \"set up\\n\"", rec.Code, rec.Body)
	}
}

func TestContainerLogsRefusals(t *testing.T) {
	s, _, _ := logServer(t)
	tests := []struct {
		path   string
		code   int
		reason metav1.StatusReason
		msg    string
	}{
		{"/containerLogs/default/nope/nginx", 404, metav1.StatusReasonNotFound, `pods "nope" not found`},
		{"/containerLogs/default/web-node1/ngin", 404, metav1.StatusReasonNotFound,
			`container "ngin" not found in pod "default/web-node1"; its containers are: setup (init), nginx, sidecar`},
		{"/containerLogs/default/web-node1/sidecar?previous=true", 400, metav1.StatusReasonBadRequest,
			`previous terminated container "sidecar" in pod "default/web-node1" not found`},
		{"/containerLogs/default/web-node1/sidecar", 404, metav1.StatusReasonNotFound,
			`no log of attempt 0 of container "sidecar" in pod "default/web-node1"`},
		{"/containerLogs/kube-system/etcd-node1/etcd", 400, metav1.StatusReasonBadRequest,
			`container "etcd" in pod "kube-system/etcd-node1" is waiting to start: ContainerCreating`},
		{"/containerLogs/default/web-node1/nginx?tailLines=-1", 400, metav1.StatusReasonBadRequest,
			`tailLines="-1": want a number of lines, 0 or more`},
		{"/containerLogs/default/web-node1/nginx?follow=maybe", 400, metav1.StatusReasonBadRequest,
			`follow="maybe": want true or false`},
	}
	for _, tt := range tests {
		rec := serve(t, s.Handler(), http.MethodGet, tt.path, nil)
		st := wantStatus(t, rec, tt.code, tt.reason)
		if st.Message != tt.msg {
			t.Errorf("GET %s message = %q, want %q", tt.path, st.Message, tt.msg)
		}
	}
}

func TestContainerLogsFollowSeesAppendedLines(t *testing.T) {
	s, dir, web := logServer(t)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/containerLogs/default/web-node1/nginx?follow=true&tailLines=1", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := readLines(resp.Body)

	awaitLine(t, lines, "three")
	writeCRILog(t, dir, web, "nginx", 2, "2026-01-01T00:00:03.000000000Z stdout F four")
	awaitLine(t, lines, "four")
}

// readLines sends each line read from r, until it ends.
func readLines(r io.Reader) <-chan string {
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// awaitLine waits for the next line and checks it is want.
func awaitLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	select {
	case got, ok := <-lines:
		if !ok {
			t.Fatalf("the stream ended; want the line %q", want)
		}
		if !strings.Contains(got, want) {
			t.Fatalf("next line = %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no line %q within 10s", want)
	}
}
