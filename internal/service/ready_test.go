package service

import (
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// fakeRunner is what the runner reports, set by the test.
type fakeRunner struct {
	pods    []*corev1.Pod
	ready   map[string]bool
	relists uint64
	settled bool
}

func (f *fakeRunner) Pods() []*corev1.Pod            { return f.pods }
func (f *fakeRunner) SourceReady(source string) bool { return f.ready[source] }
func (f *fakeRunner) Relists() uint64                { return f.relists }
func (f *fakeRunner) Settled() bool                  { return f.settled }

// listen makes a notify socket as the service manager does and points NOTIFY_SOCKET
// at it.
func listen(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return conn
}

// received is every message on the socket so far.
func received(t *testing.T, conn *net.UnixConn) []string {
	t.Helper()
	var out []string
	buf := make([]byte, 4096)
	for {
		conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond)) // sent already: the datagrams are queued
		n, err := conn.Read(buf)
		if err != nil {
			return out
		}
		out = append(out, string(buf[:n]))
	}
}

// READY=1 waits for every source's pods and a first relist, and then for the pods to
// settle; until then STATUS= says what it waits for, and only a change is sent.
func TestHeartbeatReportsReadyOnceSourcesAndPodsAreIn(t *testing.T) {
	conn := listen(t)
	r := &fakeRunner{ready: map[string]bool{}}
	s := New([]string{"file", "api"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.Runner = r
	running := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	steps := []struct {
		change func()
		want   []string
	}{
		{func() {}, []string{"STATUS=waiting for the pods of file, api, containerd"}},
		{func() {}, nil},
		{func() { r.ready["file"], r.ready["api"] = true, true }, []string{"STATUS=waiting for the pods of containerd"}},
		{func() { r.relists, r.pods = 1, []*corev1.Pod{running} }, []string{"STATUS=adopting the pods: 1 pod: 1 running"}},
		{func() { r.settled = true }, []string{"READY=1\nSTATUS=1 pod: 1 running"}},
		{func() {}, nil},
		{func() { r.pods = nil }, []string{"STATUS=0 pods"}},
	}
	for i, step := range steps {
		step.change()
		s.Heartbeat()
		if diff := cmp.Diff(step.want, received(t, conn)); diff != "" {
			t.Errorf("heartbeat %d sent (-want +got):\n%s", i, diff)
		}
	}
}
