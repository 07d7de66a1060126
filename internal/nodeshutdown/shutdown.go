// Package nodeshutdown is graceful node shutdown, as the kubelet's: holding logind's
// delay inhibitor lock, it hears the machine's shutdown coming, stops the sync loop and
// the pods (the node-critical ones last) within --shutdown-grace-period, and lets the
// shutdown go on. internal/systemd speaks D-Bus to logind; the runner stops the pods.
//
// It imports the runner (to stop the pods) and internal/systemd; it must not import
// containerd.
package nodeshutdown

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/staticpod/staticpod/internal/systemd"
	"github.com/staticpod/staticpod/runner"
)

// ErrCancelled ends the daemon when a shutdown it stopped the pods for is cancelled:
// systemd starts it again (Restart=always), and the pods with it.
var ErrCancelled = errors.New("the machine's shutdown was cancelled after the pods were stopped; exiting to be started again")

// Shutdown is graceful node shutdown, as the kubelet's: it holds a logind delay
// inhibitor lock, so that when the machine is asked to shut down logind tells it and
// waits; it then stops the sync loop (nothing restarts a pod any more), stops the pods
// with their preStop hooks and grace periods cut to --shutdown-grace-period (the
// node-critical ones last), and releases the lock, letting the shutdown go on with no
// container left for systemd to wait on.
type Shutdown struct {
	bus   *systemd.Bus
	watch *systemd.ShutdownWatch
	lock  *os.File
	grace runner.ShutdownGrace
	r     *runner.Runner
	idle  func(status string) // pings the service manager while the loop is stopped
	log   *slog.Logger

	stopped bool // the pods were stopped for a shutdown; read after Run returned
}

// New takes the lock, first making logind wait long enough for it. idle tells the
// service manager, from Run's goroutine, that staticpod is alive and doing what it
// should while its sync loop is stopped (service.Service's Idle). Without logind (no
// systemd, no system bus) it fails, and the caller decides what that means.
func New(ctx context.Context, grace runner.ShutdownGrace, r *runner.Runner, idle func(status string), log *slog.Logger) (*Shutdown, error) {
	bus, err := systemd.Connect(ctx)
	if err != nil {
		return nil, err
	}
	s := &Shutdown{bus: bus, grace: grace, r: r, idle: idle, log: log}
	if err := s.inhibit(ctx); err != nil {
		bus.Close()
		return nil, err
	}
	return s, nil
}

// stopMargin is what logind waits beyond --shutdown-grace-period: the calls that stop
// the containers (a hook's exec, the signals, the wait for a killed one to go) take
// time of their own, seconds on a loaded machine.
const stopMargin = 5 * time.Second

func (s *Shutdown) inhibit(ctx context.Context) error {
	delay, err := s.bus.EnsureInhibitDelay(ctx, systemd.LogindDropInDir, s.grace.Total+stopMargin)
	if err != nil {
		return err
	}
	if s.watch, err = s.bus.WatchShutdown(ctx); err != nil {
		return err
	}
	if s.lock, err = s.bus.InhibitShutdown(ctx, "staticpod", "staticpod stops its pods before the machine shuts down"); err != nil {
		return err
	}
	s.log.Info("graceful node shutdown: holding logind's shutdown inhibitor lock",
		"shutdown-grace-period", s.grace.Total, "shutdown-grace-period-critical-pods", s.grace.Critical, "inhibit-delay-max", delay)
	return nil
}

// Run waits for a shutdown until ctx is done. stopRunner stops the sync loop and
// returns once it has stopped.
func (s *Shutdown) Run(ctx context.Context, stopRunner func()) error {
	defer s.bus.Close()
	for {
		active, err := s.watch.Next(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.log.Warn("graceful node shutdown is off: lost logind", "err", err)
			return nil
		}
		if active {
			break
		}
	}
	start := time.Now()
	s.log.Info("the machine is shutting down: stopping the pods", "shutdown-grace-period", s.grace.Total)
	stopRunner()
	s.idle("shutting down: stopping the pods") // the loop, which owned the service, is stopped
	s.stopped = true
	err := s.r.StopForShutdown(context.WithoutCancel(ctx), s.grace)
	if err != nil {
		s.log.Error("stopping the pods for the shutdown", "err", err)
	}
	if err := s.lock.Close(); err != nil {
		s.log.Warn("release logind's inhibitor lock", "err", err)
	}
	s.log.Info("pods stopped for the shutdown; released logind's inhibitor lock", "took", time.Since(start).Round(time.Millisecond))
	return s.await(ctx)
}

// Stopped reports whether Run stopped the pods for a shutdown; call it after Run returned.
func (s *Shutdown) Stopped() bool { return s.stopped }

// await waits, pods stopped, for the end: staticpod's SIGTERM, or a cancelled shutdown.
// It pings the watchdog meanwhile: staticpod is doing what it should, nothing.
func (s *Shutdown) await(ctx context.Context) error {
	status := "machine shutting down; pods stopped"
	every := time.Minute
	if d := systemd.WatchdogInterval(); d > 0 {
		every = d / 2
	}
	for {
		s.idle(status)
		wait, cancel := context.WithTimeout(ctx, every)
		active, err := s.watch.Next(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil && !active:
			return ErrCancelled
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			<-ctx.Done() // logind is gone: nothing more to hear
			return nil
		}
	}
}

// Grace is graceful node shutdown's policy from run's flags, checked.
func Grace(total, critical time.Duration) (runner.ShutdownGrace, error) {
	g := runner.ShutdownGrace{Total: total, Critical: critical}
	switch {
	case total < 0 || critical < 0:
		return g, fmt.Errorf("--shutdown-grace-period and --shutdown-grace-period-critical-pods must not be negative")
	case critical > total:
		return g, fmt.Errorf("--shutdown-grace-period-critical-pods %s is longer than --shutdown-grace-period %s, of which it is a part", critical, total)
	}
	return g, nil
}
