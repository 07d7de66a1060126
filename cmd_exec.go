package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/runner"
)

// Exit codes of exec when the command could not run, as shells and docker exec use
// them.
const (
	exitCannotRun = 126
	exitNotFound  = 127
)

func execCommand() *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run a command in a container",
		ArgsUsage: "POD -- CMD...",
		Description: "The container is looked up through the daemon's API; the command runs through containerd,\n" +
			"in the container's namespaces and with its user and environment. exec exits with the\n" +
			"command's exit code.",
		UseShortOptionHandling: true,
		Flags: append(append(clientFlags(), containerFlag(),
			&cli.BoolFlag{Name: "stdin", Aliases: []string{"i"}, Usage: "pass standard input to the command"},
			&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "run the command with a terminal"},
		), containerdFlags()...),
		Action: runExec,
	}
}

// containerdFlags name the daemon's containerd, for the commands that reach it
// directly. Their defaults and environment variables are run's.
func containerdFlags() []cli.Flag {
	str := func(name, value, usage string, aliases ...string) cli.Flag {
		return &cli.StringFlag{Name: name, Value: value, Usage: usage, Aliases: aliases, EnvVars: env(name)}
	}
	return []cli.Flag{
		str("containerd-address", defaultContainerdSock, "containerd's socket", "container-runtime-endpoint"),
		str("containerd-namespace", defaultNamespace, "containerd namespace of the daemon"),
		str("root-dir", defaultRootDir, "the daemon's state directory"),
		str("pod-log-dir", defaultPodLogDir, "the daemon's directory of pod logs"),
	}
}

func runExec(c *cli.Context) error {
	args, command, err := splitArgs(c)
	if err != nil {
		return err
	}
	if len(args) != 1 || len(command) == 0 {
		return cli.Exit("exec takes one POD, then the command after --: staticpod exec web-node1 -- sh -c 'echo hi'", exitUsage)
	}
	ref, err := parsePodRef(args[0])
	if err != nil {
		return err
	}
	client, err := newAPIClient(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM)
	defer stop()
	id, err := execTarget(ctx, client, ref, c.String("container"))
	if err != nil {
		return exitError("exec", err)
	}
	root, err := filepath.Abs(c.String("root-dir"))
	if err != nil {
		return cli.Exit(fmt.Sprintf("--root-dir: %v", err), exitUsage)
	}
	rt, err := containerdrt.New(ctx, containerdrt.Config{
		Address:   c.String("containerd-address"),
		Namespace: c.String("containerd-namespace"),
		RootDir:   root,
		PodLogDir: c.String("pod-log-dir"),
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return cli.Exit(fmt.Sprintf("exec: %v (exec reaches containerd directly: see --containerd-address)", err), exitInvalid)
	}
	defer rt.Close()
	code, err := execIn(ctx, c, rt, id, command)
	if err != nil {
		return execError(err)
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// execTarget returns the containerd ID of the pod's running container name (or of its
// only container).
func execTarget(ctx context.Context, client *apiClient, ref podRef, name string) (string, error) {
	pod, err := client.pod(ctx, ref)
	if err != nil {
		return "", err
	}
	name, err = pickContainer(pod, name)
	if err != nil {
		return "", err
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if cs.Name != name {
			continue
		}
		if cs.State.Running == nil || !strings.HasPrefix(cs.ContainerID, "containerd://") {
			return "", fmt.Errorf("container %s of pod %s is not running (%s)", name, displayName(pod.Namespace, pod.Name), stateWord(cs.State))
		}
		return strings.TrimPrefix(cs.ContainerID, "containerd://"), nil
	}
	return "", fmt.Errorf("container %s of pod %s has not started yet", name, displayName(pod.Namespace, pod.Name))
}

// execIn runs the command in the container. Without -i and -t it goes through
// Runtime.Exec; with them it talks to containerd's client directly (execDirect).
func execIn(ctx context.Context, c *cli.Context, rt *containerdrt.Runtime, id string, command []string) (int, error) {
	s := execStreams{out: c.App.Writer, errOut: c.App.ErrWriter}
	if c.Bool("stdin") {
		s.in = c.App.Reader
	}
	if c.Bool("tty") {
		f, ok := c.App.Reader.(*os.File)
		if s.tty = ok && term.IsTerminal(int(f.Fd())); s.tty {
			s.term = f
		} else {
			fmt.Fprintln(c.App.ErrWriter, "Unable to use a TTY - input is not a terminal")
		}
	}
	if !s.tty {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGINT) // Ctrl-C kills the command
		defer stop()
	}
	if s.in == nil && !s.tty {
		return rt.Exec(ctx, id, runner.ExecRequest{Command: command, Stdout: s.out, Stderr: s.errOut})
	}
	return execDirect(ctx, rt.Client(), c.String("containerd-namespace"), id, command, s)
}

// execStreams are exec's standard streams, and the local terminal for -t.
type execStreams struct {
	in          io.Reader // nil without -i
	out, errOut io.Writer
	tty         bool
	term        *os.File // the local terminal, with tty
}

// execDirect runs the command through containerd's client: runner.ExecRequest can
// neither resize the terminal nor close the command's input when ours ends (CloseIO),
// without which `exec -i cat` never ends. With a terminal, the local one is put in raw
// mode while input is passed, and the remote one follows its size.
func execDirect(ctx context.Context, cl *client.Client, ns, id string, command []string, s execStreams) (int, error) {
	ctx = namespaces.WithNamespace(ctx, ns)
	task, pspec, err := execTask(ctx, cl, id)
	if err != nil {
		return -1, err
	}
	pspec.Args, pspec.Terminal = command, s.tty
	opts := []cio.Opt{cio.WithStreams(nil, s.out, s.errOut)}
	var eof chan struct{} // with a terminal, the end of input does not end the command's
	if s.in != nil && !s.tty {
		eof = make(chan struct{})
		opts[0] = cio.WithStreams(&eofReader{r: s.in, eof: eof}, s.out, s.errOut)
	} else if s.in != nil {
		opts[0] = cio.WithStreams(s.in, s.out, nil)
	}
	if s.tty {
		opts = append(opts, cio.WithTerminal) // stderr goes to the terminal too
		if w, h, err := term.GetSize(int(s.term.Fd())); err == nil {
			pspec.ConsoleSize = &specs.Box{Width: uint(w), Height: uint(h)}
		}
	}
	proc, err := task.Exec(ctx, execID(), pspec, cio.NewCreator(opts...))
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, err)
	}
	defer proc.Delete(context.WithoutCancel(ctx))
	exited, err := proc.Wait(ctx)
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, err)
	}
	if s.tty && s.in != nil {
		if state, err := term.MakeRaw(int(s.term.Fd())); err == nil {
			defer term.Restore(int(s.term.Fd()), state)
		}
	}
	if err := proc.Start(ctx); err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, err)
	}
	winch := make(chan os.Signal, 1)
	if s.tty {
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
	}
	for {
		select {
		case <-eof:
			eof = nil
			if err := proc.CloseIO(ctx, client.WithStdinCloser); err != nil {
				return -1, fmt.Errorf("exec in %s: close input: %w", id, err)
			}
		case <-winch:
			if w, h, err := term.GetSize(int(s.term.Fd())); err == nil {
				_ = proc.Resize(ctx, uint32(w), uint32(h))
			}
		case st := <-exited:
			proc.IO().Wait()
			code, _, err := st.Result()
			return int(code), err
		case <-ctx.Done():
			_ = proc.Kill(context.WithoutCancel(ctx), syscall.SIGKILL)
			return -1, ctx.Err()
		}
	}
}

// execTask returns the running task of container id and a copy of its process spec,
// which an exec starts from: the container's user, environment and capabilities.
func execTask(ctx context.Context, cl *client.Client, id string) (client.Task, *specs.Process, error) {
	ctr, err := cl.LoadContainer(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("exec in %s: %w", id, err)
	}
	spec, err := ctr.Spec(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("exec in %s: %w", id, err)
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("exec in %s: %w", id, err)
	}
	pspec := *spec.Process
	return task, &pspec, nil
}

// eofReader closes eof when r is at its end.
type eofReader struct {
	r    io.Reader
	eof  chan struct{}
	once sync.Once
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.eof) })
	}
	return n, err
}

func execID() string {
	return "exec-cli-" + randomHex(6)
}

// execError exits with 127 when the command does not exist in the container, 126 when
// it could not be started otherwise, as shells do, and 1 for other failures.
func execError(err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, context.Canceled):
		return cli.Exit("", 130)
	case strings.Contains(msg, "executable file not found") || strings.Contains(msg, "exec failed") && strings.Contains(msg, "no such file"):
		return cli.Exit("exec: "+msg, exitNotFound)
	case strings.Contains(msg, "exec failed"):
		return cli.Exit("exec: "+msg, exitCannotRun)
	}
	return cli.Exit("exec: "+msg, exitInvalid)
}

// stateWord says what a container that does not run is doing: Waiting: CrashLoopBackOff.
func stateWord(st corev1.ContainerState) string {
	switch {
	case st.Terminated != nil:
		return "Terminated: " + terminatedReason(st.Terminated)
	case st.Waiting != nil && st.Waiting.Reason != "":
		return "Waiting: " + st.Waiting.Reason
	}
	return "Waiting"
}
