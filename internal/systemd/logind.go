package systemd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// D-Bus names of logind's manager.
const (
	logindService = "org.freedesktop.login1"
	logindPath    = dbus.ObjectPath("/org/freedesktop/login1")
	logindManager = "org.freedesktop.login1.Manager"
	logindUnit    = "systemd-logind.service"

	prepareForShutdown = "PrepareForShutdown"
	inhibitDelayMax    = logindManager + ".InhibitDelayMaxUSec"

	// LogindDropInDir is where logind reads drop-ins that last until the next boot;
	// staticpod raises InhibitDelayMaxSec there, the kubelet in /etc.
	LogindDropInDir = "/run/systemd/logind.conf.d"
	dropInName      = "99-staticpod.conf"

	reloadWait = 10 * time.Second // for logind to apply a raised InhibitDelayMaxSec
	reloadPoll = 100 * time.Millisecond
)

// InhibitDelayMax is how long logind waits for delay locks before it shuts down:
// InhibitDelayMaxSec of logind.conf, 5 s by default.
func (b *Bus) InhibitDelayMax(ctx context.Context) (time.Duration, error) {
	v, err := b.conn.Object(logindService, logindPath).GetProperty(inhibitDelayMax)
	if err != nil {
		return 0, fmt.Errorf("read logind's InhibitDelayMaxUSec: %w", err)
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("read logind's InhibitDelayMaxUSec: %v is not a uint64", v)
	}
	return time.Duration(usec) * time.Microsecond, nil
}

// EnsureInhibitDelay makes logind wait at least want for delay locks: when its
// InhibitDelayMaxSec is shorter, it writes a drop-in into dir (LogindDropInDir) and
// has logind reload its configuration (SIGHUP), as the kubelet does, then checks that
// logind took it. It returns the delay in force.
func (b *Bus) EnsureInhibitDelay(ctx context.Context, dir string, want time.Duration) (time.Duration, error) {
	have, err := b.InhibitDelayMax(ctx)
	if err != nil || have >= want {
		return have, err
	}
	secs := int64((want + time.Second - 1) / time.Second)
	conf := fmt.Sprintf("# Written by staticpod for --shutdown-grace-period: logind waits this long for its lock.\n[Login]\nInhibitDelayMaxSec=%d\n", secs)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return have, fmt.Errorf("raise logind's InhibitDelayMaxSec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, dropInName), []byte(conf), 0o644); err != nil {
		return have, fmt.Errorf("raise logind's InhibitDelayMaxSec: %w", err)
	}
	if err := b.killUnit(ctx, logindUnit, int32(syscall.SIGHUP)); err != nil {
		return have, fmt.Errorf("raise logind's InhibitDelayMaxSec: reload logind: %w", err)
	}
	// logind says nothing when it has reloaded: ask until it reports the new value.
	ctx, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	tick := time.NewTicker(reloadPoll)
	defer tick.Stop()
	for {
		if have, err = b.InhibitDelayMax(ctx); err == nil && have >= want {
			return have, nil
		}
		select {
		case <-ctx.Done():
			return have, fmt.Errorf("logind's InhibitDelayMaxSec is %s after a reload, not the %s written in %s", have, want, filepath.Join(dir, dropInName))
		case <-tick.C:
		}
	}
}

// InhibitShutdown takes a delay lock on shutdown in logind's name of who, for why: when
// the machine is asked to shut down, logind sends PrepareForShutdown and waits, up to
// InhibitDelayMax, until the lock's file is closed.
func (b *Bus) InhibitShutdown(ctx context.Context, who, why string) (*os.File, error) {
	var fd dbus.UnixFD
	err := b.conn.Object(logindService, logindPath).CallWithContext(ctx, logindManager+".Inhibit", 0, "shutdown", who, why, "delay").Store(&fd)
	if err != nil {
		return nil, fmt.Errorf("take logind's shutdown inhibitor lock: %w", err)
	}
	return os.NewFile(uintptr(fd), "inhibit-shutdown"), nil
}

// ShutdownWatch receives logind's PrepareForShutdown signals.
type ShutdownWatch struct {
	signals chan *dbus.Signal
}

// WatchShutdown subscribes to PrepareForShutdown. Subscribe before taking the lock:
// a shutdown asked for in between is then seen.
func (b *Bus) WatchShutdown(ctx context.Context) (*ShutdownWatch, error) {
	err := b.conn.AddMatchSignalContext(ctx, dbus.WithMatchObjectPath(logindPath),
		dbus.WithMatchInterface(logindManager), dbus.WithMatchMember(prepareForShutdown))
	if err != nil {
		return nil, fmt.Errorf("watch logind's shutdown signal: %w", err)
	}
	w := &ShutdownWatch{signals: make(chan *dbus.Signal, 8)}
	b.conn.Signal(w.signals)
	return w, nil
}

// ErrBusClosed is Next's error when the bus connection is gone.
var ErrBusClosed = errors.New("system bus connection closed")

// Next waits for the next PrepareForShutdown: true when a shutdown begins, false when
// one was cancelled. It returns ctx's error when ctx is done first.
func (w *ShutdownWatch) Next(ctx context.Context) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case s, ok := <-w.signals:
			if !ok {
				return false, ErrBusClosed
			}
			if s.Name != logindManager+"."+prepareForShutdown || len(s.Body) != 1 {
				continue
			}
			if active, ok := s.Body[0].(bool); ok {
				return active, nil
			}
		}
	}
}
