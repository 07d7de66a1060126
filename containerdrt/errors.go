package containerdrt

import (
	"errors"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"

	"github.com/staticpod/staticpod/runner"
)

// ErrConfig classes New's failures that come from its configuration rather than from
// containerd, so that the caller does not suggest starting one.
var ErrConfig = errors.New("invalid configuration")

// convertErr translates a containerd or gRPC error once, at the boundary, into the
// classes the runner knows: not found, and unavailable (containerd does not answer).
func convertErr(err error) error {
	if err == nil {
		return nil
	}
	// The client converts most errors already; ToNative would turn a native error
	// into an unknown one, so it is asked only when the error is not classed yet.
	native := err
	if !errdefs.IsNotFound(err) && !errdefs.IsUnavailable(err) {
		native = errgrpc.ToNative(err)
	}
	switch {
	case errdefs.IsNotFound(native), taskGone(native):
		return fmt.Errorf("%w: %w", runner.ErrNotFound, err)
	case errdefs.IsUnavailable(native):
		return fmt.Errorf("%w: %w", runner.ErrUnavailable, err)
	}
	return err
}

// taskNotExists is how containerd 1.6 says that a task is gone when its shim went
// away during a call (a task deleted as the shim exits): a plain error, which reaches
// the client as gRPC's Unknown, not as not found.
const taskNotExists = "task does not exist"

// taskGone reports whether err is containerd's unclassed "task does not exist".
func taskGone(err error) bool {
	return errdefs.IsUnknown(err) && strings.HasSuffix(err.Error(), taskNotExists)
}

// ignoreNotFound makes operations on what is already gone succeed, so that Runtime
// methods are idempotent.
func ignoreNotFound(err error) error {
	if errors.Is(err, runner.ErrNotFound) || errdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// isNotFound reports whether err, as containerd or gRPC returned it, says that what
// was asked for does not exist.
func isNotFound(err error) bool {
	return err != nil && ignoreNotFound(convertErr(err)) == nil
}
