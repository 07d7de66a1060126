package systemd

import (
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// listen makes a notify socket as the service manager does and points NOTIFY_SOCKET at it.
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

func receive(t *testing.T, conn *net.UnixConn) []string {
	t.Helper()
	buf := make([]byte, 4096)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("read the notify socket: %v", err)
	}
	return strings.Split(string(buf[:n]), "\n")
}

func TestNotifier(t *testing.T) {
	conn := listen(t)
	n := NewNotifier()
	for _, tc := range []struct {
		send func() error
		want []string
	}{
		{func() error { return n.Ready("3 pods: 3 running\nsecond line") }, []string{"READY=1", "STATUS=3 pods: 3 running"}},
		{func() error { return n.Status("2 pods") }, []string{"STATUS=2 pods"}},
		{n.Watchdog, []string{"WATCHDOG=1"}},
		{func() error { return n.Stopping("stopping") }, []string{"STOPPING=1", "STATUS=stopping"}},
	} {
		if err := tc.send(); err != nil {
			t.Fatal(err)
		}
		if got := receive(t, conn); !slices.Equal(got, tc.want) {
			t.Errorf("sent %q, want %q", got, tc.want)
		}
	}
}

func TestNotifierWithoutServiceManager(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := NewNotifier().Ready("x"); err != nil {
		t.Errorf("Ready without NOTIFY_SOCKET: %v, want a no-op", err)
	}
}

func TestWatchdogInterval(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "30000000")
	t.Setenv("WATCHDOG_PID", "")
	if got := WatchdogInterval(); got != 30*time.Second {
		t.Errorf("WatchdogInterval = %v, want 30s", got)
	}
	t.Setenv("WATCHDOG_USEC", "")
	if got := WatchdogInterval(); got != 0 {
		t.Errorf("WatchdogInterval without WatchdogSec = %v", got)
	}
}
