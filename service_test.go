package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestSummary(t *testing.T) {
	pod := func(phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
	}
	for _, tc := range []struct {
		pods []*corev1.Pod
		want string
	}{
		{nil, "0 pods"},
		{[]*corev1.Pod{pod(corev1.PodRunning)}, "1 pod: 1 running"},
		{[]*corev1.Pod{pod(corev1.PodRunning), pod(corev1.PodFailed), pod(corev1.PodRunning), pod(corev1.PodPending)}, "4 pods: 2 running, 1 pending, 1 failed"},
	} {
		if got := summary(tc.pods); got != tc.want {
			t.Errorf("summary = %q, want %q", got, tc.want)
		}
	}
}

func TestShutdownGrace(t *testing.T) {
	g, err := shutdownGrace(30*time.Second, 10*time.Second)
	if err != nil || g.Regular() != 20*time.Second {
		t.Errorf("shutdownGrace(30s, 10s) = %+v, %v", g, err)
	}
	for _, bad := range [][2]time.Duration{{10 * time.Second, 20 * time.Second}, {-time.Second, 0}} {
		if _, err := shutdownGrace(bad[0], bad[1]); err == nil {
			t.Errorf("shutdownGrace(%v, %v): no error", bad[0], bad[1])
		}
	}
}

// Under systemd, with stderr the journal's stream, text lines carry no time: the
// journal stamps them. Elsewhere, or with stderr sent elsewhere, they do.
func TestJournalLinesCarryNoTime(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	stream := fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	if !toJournal(f, stream) {
		t.Errorf("toJournal(%s) = false for the stream itself", stream)
	}
	if toJournal(os.Stdin, stream) || toJournal(f, "") || toJournal(f, "1:2") {
		t.Error("toJournal = true for another file or no JOURNAL_STREAM")
	}
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("staticpod started", "at", time.Unix(0, 0).UTC())
	if got := b.String(); strings.HasPrefix(got, "time=") || !strings.Contains(got, "at=1970-01-01") {
		t.Errorf("line = %q: want no record time, attributes kept", got)
	}
}
