package diskspace

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner/events"
)

// A filesystem that fills up, frees space, turns read-only and writable again gives one
// event per change, none while it stays as it is, and metrics that follow.
func TestDiskWatchReportsFullAndReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		if testenv.Required() {
			t.Fatal("mounting a tmpfs needs root")
		}
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	events := events.New(time.Now)
	reg := prometheus.NewRegistry()
	w := New(map[string]string{"log": dir}, events, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	check := func(want ...string) {
		t.Helper()
		w.check("log", dir)
		w.check("log", dir) // no change, no event
		var got []string
		for _, r := range events.All() {
			got = append(got, r.Reason)
		}
		if len(got) != len(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("events %v, want %v", got, want)
			}
		}
	}
	fault := func(kind string) float64 { return value(w.faulty.WithLabelValues("log", kind)) }

	check()
	filler := filepath.Join(dir, "filler")
	os.WriteFile(filler, make([]byte, 4<<20), 0o644) // ENOSPC once the tmpfs is full
	check(ReasonFilesystemFull)
	if fault("full") != 1 || value(w.available.WithLabelValues("log")) >= fullBytes {
		t.Errorf("metrics of a full filesystem: fault %v, available %v", fault("full"), value(w.available.WithLabelValues("log")))
	}
	os.Remove(filler)
	check(ReasonFilesystemFull, ReasonFilesystemRecovered)
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	check(ReasonFilesystemFull, ReasonFilesystemRecovered, ReasonFilesystemReadOnly)
	if fault("read-only") != 1 || fault("full") != 0 {
		t.Errorf("metrics of a read-only filesystem: read-only %v, full %v", fault("read-only"), fault("full"))
	}
}

// value reads a gauge.
func value(g prometheus.Gauge) float64 {
	var m dto.Metric
	g.Write(&m)
	return m.GetGauge().GetValue()
}
