package containerdrt

import (
	"errors"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"

	"github.com/staticpod/staticpod/runner"
)

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
	case errdefs.IsNotFound(native):
		return fmt.Errorf("%w: %w", runner.ErrNotFound, err)
	case errdefs.IsUnavailable(native):
		return fmt.Errorf("%w: %w", runner.ErrUnavailable, err)
	}
	return err
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
