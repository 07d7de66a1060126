package containerdrt

import (
	"errors"
	"fmt"
	"testing"

	"github.com/containerd/errdefs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/staticpod/staticpod/runner"
)

// containerd 1.6 answers the deletion of a task whose shim just went away with an
// unclassed "task does not exist" (gRPC Unknown): it is gone, as a not-found task is,
// so removing what never started does not fail on it and leave its record behind.
func TestConvertErrClassesAGoneTaskAsNotFound(t *testing.T) {
	for _, tt := range []struct {
		err      error
		notFound bool
	}{
		{status.Error(codes.Unknown, "task does not exist"), true},
		{fmt.Errorf("delete: %w", status.Error(codes.Unknown, "task does not exist")), true},
		{status.Error(codes.NotFound, "container x: not found"), true},
		{errdefs.ErrNotFound, true},
		{status.Error(codes.Unknown, "task does not exist: but something else failed"), false},
		{status.Error(codes.Internal, "task does not exist"), false},
	} {
		if got := errors.Is(convertErr(tt.err), runner.ErrNotFound); got != tt.notFound {
			t.Errorf("convertErr(%v) is not found = %v, want %v", tt.err, got, tt.notFound)
		}
	}
}
