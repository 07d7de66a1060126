package main

import (
	"fmt"
	"log/slog"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/systemd"
	"github.com/staticpod/staticpod/runner"
)

// service tells systemd how staticpod is doing when it runs as a Type=notify service:
// READY=1 once every source has delivered its pods, the loop has relisted, and every
// pod has been synced once (so the pods that were running are adopted, not started
// again; after settleWait READY=1 comes anyway, the pods still settling), a one-line
// STATUS= when the
// pods' summary changes, and watchdog pings. heartbeat is the runner's Heartbeat: the
// sync loop calls it only while it turns and relists succeed, so a wedged loop stops
// the pings and systemd restarts staticpod. Only the loop's goroutine calls heartbeat
// (and idle once the loop is stopped), so service needs no mutex.
type service struct {
	notify   *systemd.Notifier
	watchdog bool // WatchdogSec is set for this process
	r        *runner.Runner
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

func newService(sources []string, log *slog.Logger) *service {
	return &service{notify: systemd.NewNotifier(), watchdog: systemd.WatchdogInterval() > 0, sources: sources, log: log}
}

func (s *service) heartbeat() {
	if s.watchdog {
		s.report(s.notify.Watchdog())
	}
	status := summary(s.r.Pods())
	if !s.ready {
		if waiting := s.waiting(); len(waiting) > 0 {
			status = "waiting for the pods of " + strings.Join(waiting, ", ")
		} else if s.beats++; !s.r.Settled() && s.beats < settleBeats {
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

// idle pings the watchdog while the loop is stopped on purpose (the machine shuts
// down): staticpod is then doing what it should, nothing.
func (s *service) idle(status string) {
	if s.watchdog {
		s.report(s.notify.Watchdog())
	}
	if status != s.status {
		s.status = status
		s.report(s.notify.Status(status))
	}
}

// waiting lists the sources that have not delivered their pods yet, or "containerd"
// before the first relist.
func (s *service) waiting() []string {
	var out []string
	for _, src := range s.sources {
		if !s.r.SourceReady(src) {
			out = append(out, src)
		}
	}
	if s.r.Relists() == 0 {
		out = append(out, "containerd")
	}
	return out
}

// report logs a failed notification at debug level: the service manager's socket
// does not fail in practice, and a line per ping would flood the log.
func (s *service) report(err error) {
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
