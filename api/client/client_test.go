package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/api/apitest"
	"github.com/staticpod/staticpod/runner/events"
)

func pod(namespace, name string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

func TestPodsAndPod(t *testing.T) {
	f := apitest.NewServer(t, []corev1.Pod{pod("default", "web-node1"), pod("kube-system", "etcd-node1")})
	c := New(f.Socket)
	list, err := c.Pods(t.Context())
	if err != nil || len(list.Items) != 2 || list.Items[1].Name != "etcd-node1" {
		t.Fatalf("Pods = %v, %v; want web-node1 and etcd-node1", list, err)
	}
	p, err := c.Pod(t.Context(), "kube-system", "etcd-node1")
	if err != nil || p.Name != "etcd-node1" || f.LastRequest() != "/pods/kube-system/etcd-node1" {
		t.Errorf("Pod(kube-system, etcd-node1) = %v, %v, asked %s", p, err, f.LastRequest())
	}
}

func TestPodNotFoundIsTyped(t *testing.T) {
	c := New(apitest.NewServer(t, nil).Socket)
	_, err := c.Pod(t.Context(), "default", "web")
	var nf *NotFoundError
	if !errors.As(err, &nf) || nf.Namespace != "default" || nf.Name != "web" || err.Error() != `pod "default/web" not found` {
		t.Errorf("Pod of a pod the daemon does not run = %#v (%v), want a *NotFoundError", err, err)
	}
}

func TestEventsAskForThePod(t *testing.T) {
	f := apitest.NewServer(t, nil)
	f.SetEvents([]events.Record{{Pod: "kube-system/etcd-node1", Reason: "Started", Count: 1}})
	records, err := New(f.Socket).Events(t.Context(), "kube-system", "etcd-node1")
	if err != nil || len(records) != 1 || records[0].Reason != "Started" {
		t.Errorf("Events = %v, %v", records, err)
	}
	if got := f.LastRequest(); got != "/events?pod=kube-system%2Fetcd-node1" {
		t.Errorf("Events asked %s", got)
	}
}

func TestLogsQueryAndStream(t *testing.T) {
	f := apitest.NewServer(t, nil)
	c := New(f.Socket)
	zero, five := 0, 5
	for _, tc := range []struct {
		opts LogOptions
		want string
	}{
		{LogOptions{}, "/containerLogs/default/web-node1/main"},
		{LogOptions{TailLines: &zero}, "/containerLogs/default/web-node1/main?tailLines=0"},
		{LogOptions{Follow: true, Previous: true, Timestamps: true, TailLines: &five}, "/containerLogs/default/web-node1/main?follow=1&previous=1&tailLines=5&timestamps=1"},
	} {
		stream, err := c.Logs(t.Context(), "default", "web-node1", "main", tc.opts)
		if err != nil {
			t.Fatalf("Logs(%+v): %v", tc.opts, err)
		}
		data, err := io.ReadAll(stream)
		stream.Close()
		if err != nil || string(data) != apitest.Log {
			t.Errorf("Logs(%+v) read %q, %v", tc.opts, data, err)
		}
		if got := f.LastRequest(); got != tc.want {
			t.Errorf("Logs(%+v) asked %s, want %s", tc.opts, got, tc.want)
		}
	}
}

func TestAPIErrorCarriesTheDaemonsMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want APIError
	}{
		{"status", `{"kind":"Status","message":"runner not ready"}`, APIError{Code: 503, Message: "runner not ready"}},
		{"text", "overloaded\n", APIError{Code: 503, Message: "overloaded"}},
		{"empty", "", APIError{Code: 503, Message: "Service Unavailable"}},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, tc.body)
		}))
		c, err := NewURL(srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Pods(t.Context())
		srv.Close()
		var apiErr *APIError
		if !errors.As(err, &apiErr) || !cmp.Equal(*apiErr, tc.want) {
			t.Errorf("%s: Pods = %v, want %+v", tc.name, err, tc.want)
		}
	}
	if got := (&APIError{Code: 503, Message: "runner not ready"}).Error(); got != "runner not ready (HTTP 503)" {
		t.Errorf("APIError says %q", got)
	}
}

func TestNewURLSendsTheToken(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","items":[]}`)
	}))
	defer srv.Close()
	c, err := NewURL(srv.URL+"/", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pods(t.Context()); err != nil || auth != "Bearer s3cret" {
		t.Errorf("Pods over TCP: %v, Authorization %q", err, auth)
	}
	for _, bad := range []string{"127.0.0.1:8080", "ftp://host", "http://"} {
		if _, err := NewURL(bad, ""); err == nil {
			t.Errorf("NewURL(%q) = nil error, want one", bad)
		}
	}
}

func TestUnreachableSaysWhy(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone.sock")
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	tcp, err := NewURL("http://127.0.0.1:1", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		c     *Client
		errno syscall.Errno
		want  string
	}{
		{"missing socket", New(missing), syscall.ENOENT, "the staticpod daemon is not running: no API socket at " + missing + "; start it with `staticpod run` (or `systemctl start staticpod`)"},
		{"stale socket", New(stale), syscall.ECONNREFUSED, "nothing listens on the unix socket " + stale + " (left behind by a daemon that exited?)"},
		{"nothing at the server", tcp, syscall.ECONNREFUSED, "does not answer at http://127.0.0.1:1: connection refused"},
	} {
		_, err := tc.c.Pods(t.Context())
		var unreachable *UnreachableError
		if !errors.As(err, &unreachable) || !errors.Is(err, tc.errno) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Pods = %v; want an *UnreachableError (%v) that says %q", tc.name, err, tc.errno, tc.want)
		}
	}

	// Root opens any socket, so the refusal is made up as the dialer reports it.
	denied := &url.Error{Op: "Get", URL: "http://staticpod/pods", Err: &net.OpError{Op: "dial", Net: "unix",
		Err: os.NewSyscallError("connect", syscall.EACCES)}}
	if got := New(DefaultSocket).dialError(denied).Error(); !strings.Contains(got, "permission denied on the unix socket "+DefaultSocket) || !strings.Contains(got, "root") {
		t.Errorf("permission denied says %q", got)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var unreachable *UnreachableError
	if _, err := New(missing).Pods(ctx); !errors.Is(err, context.Canceled) || errors.As(err, &unreachable) {
		t.Errorf("Pods after cancellation = %v, want context.Canceled as it is", err)
	}
}
