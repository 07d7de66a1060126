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
	err = errgrpc.ToNative(err)
	switch {
	case errdefs.IsNotFound(err):
		return fmt.Errorf("%w: %w", runner.ErrNotFound, err)
	case errdefs.IsUnavailable(err):
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
