package ctrd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// checkPeriod is how often a supervised containerd is checked.
const checkPeriod = 5 * time.Second

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

// Ensure starts a containerd unless one answers already, and waits until it answers.
func (s *Supervisor) Ensure(ctx context.Context) error {
	if Serving(ctx, s.Config.Address, time.Second) == nil {
		return nil
	}
	if err := s.Config.WriteConfig(s.ConfigPath); err != nil {
		return err
	}
	bin := s.Binary
	if bin == "" {
		bin = "containerd"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return fmt.Errorf("start containerd: %w (install it: apt-get install containerd runc)", err)
	}
	log, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(path, "--config", s.ConfigPath)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() // reap it if it dies while staticpod runs
	if s.Log != nil {
		s.Log.Info("started containerd", "pid", cmd.Process.Pid, "address", s.Config.Address, "log", s.LogPath)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := AwaitServing(ctx, s.Config.Address, exited); err != nil {
		return fmt.Errorf("start containerd (see %s): %w", s.LogPath, err)
	}
	return nil
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
