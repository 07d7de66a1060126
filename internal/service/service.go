// Package service is staticpod run as a systemd service (Type=notify): when it reports
// READY=1, the one-line STATUS= that systemctl status shows, and the watchdog pings that
// a wedged sync loop stops. internal/systemd speaks the protocol; this package decides
// what to say, from what the runner reports.
//
// It reads the runner through the narrow Runner interface and imports nothing of
// staticpod's but internal/systemd; it must not import containerd or the runner.
package service

import (
	"fmt"
	"log/slog"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/systemd"
)

// Runner is what Service reads of the runner (*runner.Runner).
type Runner interface {
	Pods() []*corev1.Pod
	SourceReady(source string) bool
	Relists() uint64
	Settled() bool
}

// Service tells systemd how staticpod is doing when it runs as a Type=notify service:
// READY=1 once every source has delivered its pods, the loop has relisted, and every
// pod has been synced once (so the pods that were running are adopted, not started
// again; after settleBeats READY=1 comes anyway, the pods still settling), a one-line
// STATUS= when the pods' summary changes, and watchdog pings. Heartbeat is the runner's
// Heartbeat: the sync loop calls it only while it turns and relists succeed, so a wedged
// loop stops the pings and systemd restarts staticpod. Only the loop's goroutine calls
// Heartbeat (and Idle once the loop is stopped), so Service needs no mutex.
type Service struct {
	// Runner is read at every Heartbeat: set it before the loop runs.
	Runner Runner

	notify   *systemd.Notifier
	watchdog bool // WatchdogSec is set for this process
	sources  []string
	log      *slog.Logger

	ready  bool
	status string // the last STATUS= sent
	beats  int    // heartbeats before ready, to give up waiting for the pods to settle
}

// settleBeats is how many heartbeats (2 s each) READY=1 waits for every pod to have
// been synced once, once the sources have delivered: a pod that never settles must not
// keep the service from starting.
const settleBeats = 30

// New returns the service of a daemon whose manifest sources are sources; without
// NOTIFY_SOCKET it says nothing.
func New(sources []string, log *slog.Logger) *Service {
	return &Service{notify: systemd.NewNotifier(), watchdog: systemd.WatchdogInterval() > 0, sources: sources, log: log}
}

// Heartbeat pings the watchdog and reports readiness and status: the runner's
// Heartbeat.
func (s *Service) Heartbeat() {
	if s.watchdog {
		s.report(s.notify.Watchdog())
	}
	status := summary(s.Runner.Pods())
	if !s.ready {
		if waiting := s.waiting(); len(waiting) > 0 {
			status = "waiting for the pods of " + strings.Join(waiting, ", ")
		} else if s.beats++; !s.Runner.Settled() && s.beats < settleBeats {
			status = "adopting the pods: " + status
		} else {
			s.ready = true
			s.status = status
			s.report(s.notify.Ready(status))
			s.log.Info("staticpod is ready", "status", status)
			return
		}
	}
	if status != s.status {
		s.status = status
		s.report(s.notify.Status(status))
	}
}

// Idle pings the watchdog while the loop is stopped on purpose (the machine shuts
// down): staticpod is then doing what it should, nothing.
func (s *Service) Idle(status string) {
	if s.watchdog {
		s.report(s.notify.Watchdog())
	}
	if status != s.status {
		s.status = status
		s.report(s.notify.Status(status))
	}
}

// Stopping says staticpod is stopping.
func (s *Service) Stopping() {
	s.report(s.notify.Stopping("stopping"))
}

// waiting lists the sources that have not delivered their pods yet, or "containerd"
// before the first relist.
func (s *Service) waiting() []string {
	var out []string
	for _, src := range s.sources {
		if !s.Runner.SourceReady(src) {
			out = append(out, src)
		}
	}
	if s.Runner.Relists() == 0 {
		out = append(out, "containerd")
	}
	return out
}

// report logs a failed notification at debug level: the service manager's socket
// does not fail in practice, and a line per ping would flood the log.
func (s *Service) report(err error) {
	if err != nil {
		s.log.Debug("notify systemd", "err", err)
	}
}

// summary is the pods' one-line status: "3 pods: 2 running, 1 pending".
func summary(pods []*corev1.Pod) string {
	phases := map[corev1.PodPhase]int{}
	for _, p := range pods {
		phases[p.Status.Phase]++
	}
	noun := "pods"
	if len(pods) == 1 {
		noun = "pod"
	}
	var parts []string
	for _, ph := range []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown} {
		if n := phases[ph]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, strings.ToLower(string(ph))))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d %s", len(pods), noun)
	}
	return fmt.Sprintf("%d %s: %s", len(pods), noun, strings.Join(parts, ", "))
}
