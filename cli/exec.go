package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/client"
	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/runner"
)

// Exec is the exec command: a command run in a pod's container, through containerd.
func Exec() *cli.Command {
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

func runExec(c *cli.Context) error {
	args, command, err := splitArgs(c)
	if err != nil {
		return err
	}
	if len(args) != 1 || len(command) == 0 {
		return cli.Exit("exec takes one POD, then the command after --: staticpod exec web-node1 -- sh -c 'echo hi'", ExitUsage)
	}
	ref, err := parsePodRef(args[0])
	if err != nil {
		return err
	}
	api, err := newClient(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM)
	defer stop()
	id, err := execTarget(ctx, api, ref, c.String("container"))
	if err != nil {
		return exitError("exec", err)
	}
	root, err := filepath.Abs(c.String("root-dir"))
	if err != nil {
		return cli.Exit(fmt.Sprintf("--root-dir: %v", err), ExitUsage)
	}
	rt, err := containerdrt.New(ctx, containerdrt.Config{
		Address:   c.String("containerd-address"),
		Namespace: c.String("containerd-namespace"),
		RootDir:   root,
		PodLogDir: c.String("pod-log-dir"),
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return cli.Exit(fmt.Sprintf("exec: %v (exec reaches containerd directly: see --containerd-address)", err), ExitInvalid)
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
func execTarget(ctx context.Context, api *client.Client, ref podRef, name string) (string, error) {
	pod, err := fetchPod(ctx, api, ref)
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
			return "", fmt.Errorf("container %s of pod %s is not running (%s)", name, DisplayName(pod.Namespace, pod.Name), stateWord(cs.State))
		}
		return strings.TrimPrefix(cs.ContainerID, "containerd://"), nil
	}
	return "", fmt.Errorf("container %s of pod %s has not started yet", name, DisplayName(pod.Namespace, pod.Name))
}

// execIn runs the command in the container through the runtime. With -t the local
// terminal is put in raw mode and the remote one follows its size; without it, Ctrl-C
// kills the command.
func execIn(ctx context.Context, c *cli.Context, rt *containerdrt.Runtime, id string, command []string) (int, error) {
	req := runner.ExecRequest{Command: command, Stdout: c.App.Writer, Stderr: c.App.ErrWriter}
	if c.Bool("stdin") {
		req.Stdin = c.App.Reader
	}
	var tty *os.File
	if c.Bool("tty") {
		if f, ok := c.App.Reader.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			tty, req.TTY = f, true
		} else {
			fmt.Fprintln(c.App.ErrWriter, "Unable to use a TTY - input is not a terminal")
		}
	}
	if tty == nil {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGINT) // Ctrl-C kills the command
		defer stop()
		return rt.Exec(ctx, id, req)
	}
	if w, h, err := term.GetSize(int(tty.Fd())); err == nil {
		req.Size = &runner.TermSize{Width: uint16(w), Height: uint16(h)}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends followSize with the command
	resize := make(chan runner.TermSize, 1)
	req.Resize = resize
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	go followSize(ctx, tty, winch, resize)
	if req.Stdin != nil {
		if state, err := term.MakeRaw(int(tty.Fd())); err == nil {
			defer term.Restore(int(tty.Fd()), state)
		}
	}
	return rt.Exec(ctx, id, req)
}

// followSize sends the terminal's size each time it changes, until ctx is done.
func followSize(ctx context.Context, tty *os.File, winch <-chan os.Signal, resize chan<- runner.TermSize) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-winch:
		}
		if w, h, err := term.GetSize(int(tty.Fd())); err == nil {
			select {
			case resize <- runner.TermSize{Width: uint16(w), Height: uint16(h)}:
			default: // a size is pending already; the next change sends the newest
			}
		}
	}
}

// execError exits with 127 when the command does not exist in the container, 126 when
// it could not be started otherwise, as shells do, and 1 for other failures.
func execError(err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, context.Canceled):
		return cli.Exit("", 130)
	case strings.Contains(msg, "executable file not found") || strings.Contains(msg, "exec failed") && strings.Contains(msg, "no such file"):
		return cli.Exit("exec: "+msg, ExitNotFound)
	case strings.Contains(msg, "exec failed"):
		return cli.Exit("exec: "+msg, ExitCannotRun)
	}
	return cli.Exit("exec: "+msg, ExitInvalid)
}

// stateWord says what a container that does not run is doing: Waiting: CrashLoopBackOff.
func stateWord(st corev1.ContainerState) string {
	switch {
	case st.Terminated != nil:
		return "Terminated: " + TerminatedReason(st.Terminated)
	case st.Waiting != nil && st.Waiting.Reason != "":
		return "Waiting: " + st.Waiting.Reason
	}
	return "Waiting"
}
