package runner

import (
	"context"
	"io"
	"net"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/runner/action"
)

// target is the container a probe or hook runs against.
type target struct {
	pod       *corev1.Pod
	container *corev1.Container
	id        string     // the container's runtime ID
	sandbox   *Container // the pod's sandbox, nil for a pod without one
}

// runAction runs handler h against t on rt; see action.Run.
func runAction(ctx context.Context, rt Runtime, t target, h action.Handler) error {
	return action.Run(ctx, targetRuntime{rt: rt, t: t}, t.container, h)
}

// targetRuntime is rt as an action against t sees it: exec in t's container, dial from
// its sandbox's network namespace.
type targetRuntime struct {
	rt Runtime
	t  target
}

func (r targetRuntime) Exec(ctx context.Context, cmd []string, stdout, stderr io.Writer) (int, error) {
	return r.rt.Exec(ctx, r.t.id, ExecRequest{Command: cmd, Stdout: stdout, Stderr: stderr})
}

func (r targetRuntime) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	return r.rt.Dial(ctx, r.t.sandbox, network, address)
}
