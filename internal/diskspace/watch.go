// Package diskspace watches the filesystems staticpod writes to on its own, the pod log
// dir and the root dir, and reports when one becomes full or read-only and when it
// recovers: an event, a log line and metrics. Neither fault stops a pod, so nothing else
// would tell.
//
// It records its events in the runner's event log, so it imports runner (for Events and
// Record); it must not import containerd or anything that runs pods.
package diskspace

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/staticpod/staticpod/runner/events"
)

// Reasons of the events a Watch records.
const (
	ReasonFilesystemFull      = "FilesystemFull"
	ReasonFilesystemReadOnly  = "FilesystemReadOnly"
	ReasonFilesystemRecovered = "FilesystemRecovered"
)

const (
	// checkPeriod paces a Watch: statfs is cheap, and a full log disk is news an
	// operator wants within seconds.
	checkPeriod = 2 * time.Second
	// fullBytes is the free space below which a filesystem counts as full: less
	// than a few log records' worth of rotation.
	fullBytes = 1 << 20
)

// Watch reports the state of the filesystems staticpod writes to on its own: the
// pod log dir, where the shims' log writers write what containers print (and drop it
// while the filesystem is full, never blocking a container), and the root dir (pod
// data, pushed manifests, remembered results). Neither fault stops a pod, so nothing
// else would tell: it records an event when a filesystem becomes full or read-only and
// when it recovers, logs the same, and exports the free space and the state as metrics.
type Watch struct {
	dirs   map[string]string // what ("log", "root") -> directory
	events *events.Store
	log    *slog.Logger

	available *prometheus.GaugeVec // staticpod_filesystem_available_bytes{dir}
	faulty    *prometheus.GaugeVec // staticpod_filesystem_fault{dir,fault}: 1 while full or read-only
	state     map[string]string    // what -> "", "full" or "read-only"; owned by Run
}

// New watches dirs (what, "log" or "root", -> directory), recording in events and
// registering its metrics with reg.
func New(dirs map[string]string, events *events.Store, reg prometheus.Registerer, log *slog.Logger) *Watch {
	w := &Watch{
		dirs: dirs, events: events, log: log, state: map[string]string{},
		available: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "staticpod_filesystem_available_bytes",
			Help: "Bytes available to staticpod on the filesystem of the pod log dir (dir=\"log\") and of the root dir (dir=\"root\").",
		}, []string{"dir"}),
		faulty: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "staticpod_filesystem_fault",
			Help: "1 while the filesystem of the pod log dir or root dir is full (fault=\"full\") or read-only (fault=\"read-only\"), else 0.",
		}, []string{"dir", "fault"}),
	}
	for what := range dirs {
		w.faulty.WithLabelValues(what, "full")
		w.faulty.WithLabelValues(what, "read-only")
	}
	reg.MustRegister(w.available, w.faulty)
	return w
}

// Run checks every checkPeriod until ctx is done.
func (w *Watch) Run(ctx context.Context) error {
	tick := time.NewTicker(checkPeriod)
	defer tick.Stop()
	for {
		for what, dir := range w.dirs {
			w.check(what, dir)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// check looks at one filesystem and reports a change of its state.
func (w *Watch) check(what, dir string) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return // not made yet, or gone: nothing is written there either
	}
	avail := st.Bavail * uint64(st.Bsize)
	w.available.WithLabelValues(what).Set(float64(avail))
	state := ""
	switch {
	case st.Flags&unix.ST_RDONLY != 0:
		state = "read-only"
	case avail < fullBytes:
		state = "full"
	}
	w.faulty.WithLabelValues(what, "full").Set(b2f(state == "full"))
	w.faulty.WithLabelValues(what, "read-only").Set(b2f(state == "read-only"))
	if state == w.state[what] {
		return
	}
	prev := w.state[what]
	w.state[what] = state
	switch state {
	case "full":
		msg := fmt.Sprintf("The filesystem of the %s dir %s is full (%d bytes available)%s", what, dir, avail, consequence(what))
		w.log.Warn("filesystem full", "dir", dir, "available", avail)
		w.events.Add(events.Record{Type: events.Warning, Reason: ReasonFilesystemFull, Message: msg})
	case "read-only":
		msg := fmt.Sprintf("The filesystem of the %s dir %s is read-only%s", what, dir, consequence(what))
		w.log.Warn("filesystem read-only", "dir", dir)
		w.events.Add(events.Record{Type: events.Warning, Reason: ReasonFilesystemReadOnly, Message: msg})
	default:
		msg := fmt.Sprintf("The filesystem of the %s dir %s is writable again (%d bytes available; it was %s)", what, dir, avail, prev)
		w.log.Info("filesystem writable again", "dir", dir, "available", avail, "was", prev)
		w.events.Add(events.Record{Type: events.Normal, Reason: ReasonFilesystemRecovered, Message: msg})
	}
}

// consequence says what a faulty filesystem costs, by what it holds.
func consequence(what string) string {
	if what == "log" {
		return ": containers run on, and what they print is dropped until there is space again"
	}
	return ": pods run on; new pods, volumes, pushed manifests and results cannot be written"
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
