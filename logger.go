package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/logs"
)

// What containerd's shim hands the logger it starts for a binary:// log URI.
const (
	loggerStdoutFD = 3 // read end of the container's stdout pipe
	loggerStderrFD = 4 // read end of its stderr pipe
	loggerReadyFD  = 5 // written and closed once the logger runs; the shim waits for it

	// loggerDrainTimeout bounds the reading that goes on after SIGTERM. The shim sends
	// SIGTERM when the task is deleted, after closing its ends of the pipes, so what is
	// left is already in them; a process that escaped the container with a copy of a pipe
	// must not keep the logger alive. The shim kills the logger 12 s after SIGTERM.
	loggerDrainTimeout = 5 * time.Second
)

// loggerCommand is the logger that containerd's shim starts for each container, through
// the binary:// log URI that containerdrt gives its tasks. It writes the container's
// stdout and stderr to its CRI log file until both pipes end. It is the shim's child, not
// staticpod's: it outlives restarts of the runner and ignores SIGINT and SIGHUP.
func loggerCommand() *cli.Command {
	return &cli.Command{
		Name:      logs.Command,
		Usage:     "write a container's output as CRI log files (containerd binary log driver)",
		ArgsUsage: "CONFIG",
		Description: "CONFIG is a URL query: path=FILE, and optionally symlink=LINK, max-size=BYTES,\n" +
			"max-files=N, max-line-size=BYTES. containerd's shim runs it with the container's\n" +
			"stdout and stderr on descriptors 3 and 4 and a readiness pipe on 5.",
		Hidden: true,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit(fmt.Sprintf("logger: want one CONFIG argument, got %d", c.NArg()), spcli.ExitUsage)
			}
			cfg, err := logs.ParseConfig(c.Args().First())
			if err != nil {
				return cli.Exit(fmt.Sprintf("logger: %v", err), spcli.ExitUsage)
			}
			if err := runLogger(cfg); err != nil {
				return fmt.Errorf("logger for container %s: %w", os.Getenv("CONTAINER_ID"), err)
			}
			return nil
		},
	}
}

// runLogger writes the inherited streams to cfg's log file until both end, or until
// loggerDrainTimeout after SIGTERM.
func runLogger(cfg logs.Config) error {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	defer signal.Stop(term)

	stdout, err := inheritedPipe(loggerStdoutFD, "stdout")
	if err != nil {
		return err
	}
	stderr, err := inheritedPipe(loggerStderrFD, "stderr")
	if err != nil {
		return err
	}
	// Without a log file the readiness byte is not sent: containerd 2.x (binary-v2) then
	// fails the task; 1.x takes the pipe's EOF as ready and the container's writes fail.
	w, err := logs.Open(cfg)
	if err != nil {
		return err
	}
	signalReady()
	copyErr := copyStreams(w, stdout, stderr, term)
	return errors.Join(copyErr, w.Close())
}

// inheritedPipe returns descriptor fd as a pollable file, so that reads can be given a
// deadline.
func inheritedPipe(fd int, name string) (*os.File, error) {
	if err := syscall.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("%s pipe on descriptor %d: %w (the logger is run by containerd's shim)", name, fd, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// signalReady writes a byte to the readiness pipe and closes it: containerd 1.x waits for
// its end only, 2.x's binary-v2 scheme also wants the byte. A shim that stopped waiting
// is no reason to stop logging, so errors are ignored.
func signalReady() {
	ready := os.NewFile(loggerReadyFD, "ready")
	if ready == nil {
		return
	}
	ready.Write([]byte{1})
	ready.Close()
}

// copyStreams copies both streams to w until they end. After SIGTERM it gives them
// loggerDrainTimeout to end.
func copyStreams(w *logs.Writer, stdout, stderr *os.File, term <-chan os.Signal) error {
	done := make(chan error, 2)
	go func() { done <- w.Copy(logs.Stdout, stdout) }()
	go func() { done <- w.Copy(logs.Stderr, stderr) }()
	var errs []error
	for running := 2; running > 0; {
		select {
		case err := <-done:
			errs = append(errs, err)
			running--
		case <-term:
			deadline := time.Now().Add(loggerDrainTimeout)
			stdout.SetReadDeadline(deadline)
			stderr.SetReadDeadline(deadline)
			term = nil // a second SIGTERM changes nothing
		}
	}
	return errors.Join(errs...)
}
