package containerdrt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/staticpod/staticpod/runner"
)

// Exec runs a command in a running container, in its namespaces and with its process
// settings (user, env, capabilities), and returns the command's exit code. ctx bounds
// the command: when it is done the command is killed.
func (r *Runtime) Exec(ctx context.Context, id string, req runner.ExecRequest) (int, error) {
	ctx = namespaces.WithNamespace(ctx, r.cfg.Namespace)
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, convertErr(err))
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, convertErr(err))
	}
	t, err := c.Task(ctx, nil)
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, convertErr(err))
	}
	pspec := *spec.Process
	pspec.Args = req.Command
	pspec.Terminal = req.TTY
	opts := []cio.Opt{cio.WithStreams(req.Stdin, req.Stdout, req.Stderr)}
	if req.TTY {
		opts = append(opts, cio.WithTerminal)
	}
	if r.cfg.FIFODir != "" {
		opts = append(opts, cio.WithFIFODir(r.cfg.FIFODir))
	}
	p, err := t.Exec(ctx, execID(), &pspec, cio.NewCreator(opts...))
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, convertErr(err))
	}
	defer p.Delete(context.WithoutCancel(ctx))
	exited, err := p.Wait(context.WithoutCancel(ctx)) // still read after a timeout
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, convertErr(err))
	}
	if err := p.Start(ctx); err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, convertErr(err))
	}
	select {
	case st := <-exited:
		p.IO().Wait() // all output is copied before the exit code is returned
		code, _, err := st.Result()
		return int(code), err
	case <-ctx.Done():
		// A process still running cannot be deleted: kill it and let it go before the
		// deferred Delete, or every timed-out probe would leave one behind in the shim.
		_ = p.Kill(context.WithoutCancel(ctx), syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(execKillWait):
		}
		p.IO().Cancel()
		return -1, ctx.Err()
	}
}

// execKillWait bounds the wait for a timed-out exec to die after SIGKILL.
const execKillWait = 5 * time.Second

func execID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "exec-" + hex.EncodeToString(b)
}
