package once

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/manifests"
)

// interruptible returns a context that the first SIGINT or SIGTERM cancels with the
// signal as its cause; a second one ends staticpod at once, as without a handler.
func interruptible(parent context.Context, errOut io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs)
			fmt.Fprintf(errOut, "staticpod once: %v: stopping the pods and cleaning up (again to leave everything as it is)\n", s)
			cancel(signalError{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() { signal.Stop(sigs); close(done); cancel(nil) }
}

type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string { return e.sig.String() }

// stopCode is the exit code of a run that ctx stopped: 124 for the timeout, 128+N
// for signal N.
func stopCode(ctx context.Context) (int, bool) {
	var sig signalError
	switch cause := context.Cause(ctx); {
	case cause == nil:
		return 0, false
	case errors.As(cause, &sig):
		return 128 + int(sig.sig), true
	}
	return ExitTimeout, true
}

// done reports whether a pod is where once waits for it: finished for a Never or
// OnFailure pod, Ready for an Always pod; failed for any pod (an Always pod past its
// activeDeadlineSeconds, or one refused at admission, never becomes Ready) once its app containers stopped: a pod
// failed by its deadline is Failed while they are still being stopped, and their exit
// codes are the run's.
func done(want, got *corev1.Pod) bool {
	switch {
	case got == nil:
		return false
	case got.Status.Phase == corev1.PodFailed:
		return !slices.ContainsFunc(got.Status.ContainerStatuses, func(cs corev1.ContainerStatus) bool { return cs.State.Running != nil })
	case want.Spec.RestartPolicy == corev1.RestartPolicyAlways:
		return manifests.ConditionTrue(got.Status, corev1.PodReady)
	}
	return got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed
}

// exitCode is 0 when every pod is done and none failed, else the exit code of the
// first failing container, the pods taken in manifest order and init containers
// first; 1 when a failed pod shows no failing exit code.
func exitCode(want, got []*corev1.Pod) int {
	for i, pod := range got {
		if pod == nil || !done(want[i], pod) {
			return spcli.ExitInvalid
		}
		if pod.Status.Phase != corev1.PodFailed {
			continue
		}
		for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				if t.ExitCode%256 == 0 {
					return spcli.ExitInvalid // would read as success
				}
				return int(t.ExitCode)
			}
		}
		return spcli.ExitInvalid
	}
	return 0
}
