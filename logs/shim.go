package logs

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// What containerd's shim hands the logger it starts for a binary:// log URI.
const (
	shimStdoutFD = 3 // read end of the container's stdout pipe
	shimStderrFD = 4 // read end of its stderr pipe
	shimReadyFD  = 5 // written and closed once the logger runs; the shim waits for it

	// shimDrainTimeout bounds the reading that goes on after SIGTERM. The shim sends
	// SIGTERM when the task is deleted, after closing its ends of the pipes, so what is
	// left is already in them; a process that escaped the container with a copy of a pipe
	// must not keep the logger alive. The shim kills the logger 12 s after SIGTERM.
	shimDrainTimeout = 5 * time.Second
)

// RunShimLogger is the body of the logger that containerd's shim starts for each
// container (the Command subcommand): it writes the container's stdout and stderr,
// inherited on descriptors 3 and 4, to cfg's log file until both pipes end, or until
// shimDrainTimeout after SIGTERM. The logger is the shim's child, not staticpod's: it
// outlives restarts of the runner and ignores SIGINT and SIGHUP.
func RunShimLogger(cfg Config) error {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	defer signal.Stop(term)

	stdout, err := inheritedPipe(shimStdoutFD, "stdout")
	if err != nil {
		return err
	}
	stderr, err := inheritedPipe(shimStderrFD, "stderr")
	if err != nil {
		return err
	}
	// Without a log file the readiness byte is not sent: containerd 2.x (binary-v2) then
	// fails the task; 1.x takes the pipe's EOF as ready and the container's writes fail.
	w, err := Open(cfg)
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
	ready := os.NewFile(shimReadyFD, "ready")
	if ready == nil {
		return
	}
	ready.Write([]byte{1})
	ready.Close()
}

// copyStreams copies both streams to w until they end. After SIGTERM it gives them
// shimDrainTimeout to end.
func copyStreams(w *Writer, stdout, stderr *os.File, term <-chan os.Signal) error {
	done := make(chan error, 2)
	go func() { done <- w.Copy(Stdout, stdout) }()
	go func() { done <- w.Copy(Stderr, stderr) }()
	var errs []error
	for running := 2; running > 0; {
		select {
		case err := <-done:
			errs = append(errs, err)
			running--
		case <-term:
			deadline := time.Now().Add(shimDrainTimeout)
			stdout.SetReadDeadline(deadline)
			stderr.SetReadDeadline(deadline)
			term = nil // a second SIGTERM changes nothing
		}
	}
	return errors.Join(errs...)
}
