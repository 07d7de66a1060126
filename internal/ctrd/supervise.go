package ctrd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

const (
	checkPeriod = 5 * time.Second  // how often a supervised containerd is checked
	stopTimeout = 10 * time.Second // how long Stop waits after SIGTERM before SIGKILL
)

// Supervisor keeps a containerd answering at its configured address: it starts one
// when none answers, and starts it again if it stops answering. The daemon runs in its
// own session and outlives staticpod, so that an upgrade of staticpod (or a crash) does
// not take the containers down with it; the next staticpod finds it answering.
type Supervisor struct {
	Binary     string // containerd; "containerd" on PATH when ""
	Config     Config
	ConfigPath string
	LogPath    string
	Log        *slog.Logger
}

// Under returns the Supervisor of a containerd that keeps everything under dir (its
// root, state, config.toml and containerd.log) and listens at address.
func Under(dir, address string, log *slog.Logger) *Supervisor {
	return &Supervisor{
		Config:     Config{Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"), Address: address},
		ConfigPath: filepath.Join(dir, "config.toml"),
		LogPath:    filepath.Join(dir, "containerd.log"),
		Log:        log,
	}
}

// Process is a containerd that Start started.
type Process struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has been waited for
	address string
}

// Ensure starts a containerd unless one answers already, and waits until it answers.
// A daemon that does not answer in time is left to come up: Run checks it again.
func (s *Supervisor) Ensure(ctx context.Context) error {
	_, err := s.start(ctx)
	return err
}

// Start is Ensure for a caller that stops the daemon when it is done, as `staticpod
// once` does: it returns the daemon it started, nil when one answered already. A
// daemon that does not answer in time is stopped.
func (s *Supervisor) Start(ctx context.Context) (*Process, error) {
	p, err := s.start(ctx)
	if err != nil && p != nil {
		p.Stop()
		return nil, err
	}
	return p, err
}

// start starts a containerd unless one answers already, and waits until it answers. On
// a failure to answer it returns the daemon with the error.
func (s *Supervisor) start(ctx context.Context) (*Process, error) {
	if Serving(ctx, s.Config.Address, time.Second) == nil {
		return nil, nil
	}
	if err := s.Config.WriteConfig(s.ConfigPath); err != nil {
		return nil, err
	}
	bin := s.Binary
	if bin == "" {
		bin = "containerd"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("start containerd: %w (install it: apt-get install containerd runc)", err)
	}
	log, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start containerd: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(path, "--config", s.ConfigPath)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start containerd: %w", err)
	}
	p := &Process{cmd: cmd, exited: make(chan struct{}), address: s.Config.Address}
	go func() { cmd.Wait(); close(p.exited) }() // reap it if it dies while staticpod runs
	if s.Log != nil {
		s.Log.Info("started containerd", "pid", cmd.Process.Pid, "address", s.Config.Address, "log", s.LogPath)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := AwaitServing(ctx, s.Config.Address, p.exited); err != nil {
		return p, fmt.Errorf("start containerd (see %s): %w", s.LogPath, err)
	}
	return p, nil
}

// Stop sends the daemon SIGTERM, SIGKILL after stopTimeout, waits until it has exited
// and removes its sockets.
func (p *Process) Stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		p.cmd.Process.Kill()
		<-p.exited
	}
	os.Remove(p.address)
	os.Remove(p.address + ".ttrpc")
}

// Run checks the daemon every few seconds and starts it again when it stops
// answering, until ctx is done.
func (s *Supervisor) Run(ctx context.Context) error {
	t := time.NewTicker(checkPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := s.Ensure(ctx); err != nil && ctx.Err() == nil && s.Log != nil {
			s.Log.Error("containerd is down and could not be started again", "err", err)
		}
	}
}
