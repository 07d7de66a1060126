package containerdrt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpod/staticpod/runner"
)

// Exec runs a command in a running container, in its namespaces and with its process
// settings (user, env, capabilities), and returns the command's exit code. ctx bounds
// the command: when it is done the command is killed. Without a terminal the end of
// Stdin closes the command's input (so `exec -i cat` ends); with one, Resize follows the
// local terminal's size.
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
	pspec.Args, pspec.Terminal = req.Command, req.TTY
	if req.TTY && req.Size != nil {
		pspec.ConsoleSize = &specs.Box{Width: uint(req.Size.Width), Height: uint(req.Size.Height)}
	}
	in, eof := req.Stdin, (chan struct{})(nil)
	if in != nil && !req.TTY {
		eof = make(chan struct{})
		in = &eofReader{r: in, eof: eof}
	}
	out, errOut := orDiscard(req.Stdout), orDiscard(req.Stderr) // the shim needs every pipe
	opts := []cio.Opt{cio.WithStreams(in, out, errOut)}
	if req.TTY {
		opts = []cio.Opt{cio.WithStreams(in, out, nil), cio.WithTerminal}
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
		if ctx.Err() != nil { // the shim may have started it all the same
			killExec(ctx, p, exited)
		}
		return -1, fmt.Errorf("exec in %s: %w", id, convertErr(err))
	}
	return waitExec(ctx, p, exited, eof, req.Resize)
}

// waitExec passes input's end and terminal resizes to a started exec until it exits.
func waitExec(ctx context.Context, p client.Process, exited <-chan client.ExitStatus, eof <-chan struct{}, resize <-chan runner.TermSize) (int, error) {
	for {
		select {
		case <-eof:
			eof = nil
			if err := p.CloseIO(ctx, client.WithStdinCloser); err != nil {
				return -1, fmt.Errorf("exec %s: close input: %w", p.ID(), convertErr(err))
			}
		case size := <-resize:
			_ = p.Resize(ctx, uint32(size.Width), uint32(size.Height))
		case st := <-exited:
			p.IO().Wait() // all output is copied before the exit code is returned
			code, _, err := st.Result()
			return int(code), err
		case <-ctx.Done():
			killExec(ctx, p, exited)
			return -1, ctx.Err()
		}
	}
}

// killExec kills an exec whose ctx is done and waits a while for it to go. A process
// still running cannot be deleted: without this every timed-out probe would leave one
// behind in the shim.
func killExec(ctx context.Context, p client.Process, exited <-chan client.ExitStatus) {
	_ = p.Kill(context.WithoutCancel(ctx), syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(execKillWait):
	}
	p.IO().Cancel()
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// eofReader closes eof once r is at its end.
type eofReader struct {
	r    io.Reader
	eof  chan struct{}
	once sync.Once
}

func (e *eofReader) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if err != nil {
		e.once.Do(func() { close(e.eof) })
	}
	return n, err
}

// execKillWait bounds the wait for a timed-out exec to die after SIGKILL.
const execKillWait = 5 * time.Second

func execID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "exec-" + hex.EncodeToString(b)
}
