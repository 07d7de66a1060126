package devices_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/staticpod/staticpod/runner/devices"
)

// A kubelet.sock that another process still serves (a kubelet on the same host) is
// left to it: the manager does not take it over, says why, and ends with its context.
func TestRunLeavesAKubeletSockAnotherProcessServes(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "kubelet.sock")
	other, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	before, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	m, err := devices.New(devices.Config{Dir: dir, Checkpoint: filepath.Join(dir, "checkpoint"), Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), "device plugins are off"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning that device plugins are off; log:\n%s", log.String())
		}
	}
	after, err := os.Stat(sock)
	if err != nil || !os.SameFile(before, after) {
		t.Errorf("kubelet.sock was replaced (%v)", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A directory whose kubelet.sock would be longer than a unix socket's path may be is
// refused with the flag named, not with bind's "invalid argument".
func TestRunRefusesASocketPathTooLong(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	m, err := devices.New(devices.Config{Dir: dir, Checkpoint: filepath.Join(t.TempDir(), "checkpoint"), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "more than the 107 a unix socket's may have: give --device-plugin-dir a shorter directory") {
		t.Fatalf("Run = %v, want the path's length refused", err)
	}
}
