package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/client"
	"github.com/staticpod/staticpod/api/wire"
)

// Exec is the exec command: a command run in a pod's container, through the daemon.
func Exec() *cli.Command {
	return &cli.Command{
		Name:         "exec",
		BashComplete: completePods(false),
		Usage:        "run a command in a container",
		ArgsUsage:    "POD -- CMD...",
		Description: "The daemon runs the command in the container's namespaces and with its user and environment,\n" +
			"over its API: the socket, or --server with the token. exec exits with the command's exit code.",
		UseShortOptionHandling: true,
		Flags: append(append(clientFlags(), containerFlag(),
			&cli.BoolFlag{Name: "stdin", Aliases: []string{"i"}, Usage: "pass standard input to the command"},
			&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "run the command with a terminal"},
		), retiredExecFlags()...),
		Action: runExec,
	}
}

// retiredExecFlags are the flags exec took when it reached containerd itself. They are
// still accepted, so that scripts that pass them keep working, and ignored: the daemon
// runs the command.
func retiredExecFlags() []cli.Flag {
	flag := func(name string, aliases ...string) cli.Flag {
		return &cli.StringFlag{Name: name, Aliases: aliases, Hidden: true, Usage: "ignored: the daemon runs the command"}
	}
	return []cli.Flag{flag("containerd-address", "container-runtime-endpoint"), flag("containerd-namespace"), flag("root-dir"), flag("pod-log-dir")}
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
	pod, err := fetchPod(ctx, api, ref)
	if err != nil {
		return exitError("exec", err)
	}
	name, err := pickContainer(pod, c.String("container"))
	if err != nil {
		return exitError("exec", err)
	}
	code, err := execIn(ctx, c, api, pod, name, command)
	if err != nil {
		return execError(err)
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// execIn runs the command in the container through the daemon. With -t the local
// terminal is put in raw mode and the remote one follows its size; without it, Ctrl-C
// kills the command.
func execIn(ctx context.Context, c *cli.Context, api *client.Client, pod *corev1.Pod, container string, command []string) (int, error) {
	opts := client.ExecOptions{Stdout: c.App.Writer, Stderr: c.App.ErrWriter}
	if c.Bool("stdin") {
		opts.Stdin = c.App.Reader
	}
	run := func(ctx context.Context) (int, error) {
		return api.Exec(ctx, pod.Namespace, pod.Name, container, command, opts)
	}
	var tty *os.File
	if c.Bool("tty") {
		if f, ok := c.App.Reader.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			tty, opts.TTY = f, true
		} else {
			fmt.Fprintln(c.App.ErrWriter, "Unable to use a TTY - input is not a terminal")
		}
	}
	if tty == nil {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGINT) // Ctrl-C kills the command
		defer stop()
		return run(ctx)
	}
	if w, h, err := term.GetSize(int(tty.Fd())); err == nil {
		opts.Size = &wire.TermSize{Width: uint16(w), Height: uint16(h)}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends followSize with the command
	resize := make(chan wire.TermSize, 1)
	opts.Resize = resize
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	go followSize(ctx, tty, winch, resize)
	if opts.Stdin != nil {
		if state, err := term.MakeRaw(int(tty.Fd())); err == nil {
			defer term.Restore(int(tty.Fd()), state)
		}
	}
	return run(ctx)
}

// followSize sends the terminal's size each time it changes, until ctx is done.
func followSize(ctx context.Context, tty *os.File, winch <-chan os.Signal, resize chan<- wire.TermSize) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-winch:
		}
		if w, h, err := term.GetSize(int(tty.Fd())); err == nil {
			select {
			case resize <- wire.TermSize{Width: uint16(w), Height: uint16(h)}:
			default: // a size is pending already; the next change sends the newest
			}
		}
	}
}

// execError exits with the code a shell gives a command that could not run (127 when
// it does not exist in the container, 126 when it could not be started otherwise), 130
// when interrupted, and as the other commands do for errors of the API.
func execError(err error) error {
	var execErr *client.ExecError
	switch {
	case errors.Is(err, context.Canceled):
		return cli.Exit("", 130)
	case errors.As(err, &execErr) && execErr.Code > 0:
		return cli.Exit("exec: "+execErr.Message, execErr.Code)
	}
	return exitError("exec", err)
}
