package cli

import (
	"context"
	"fmt"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/api/client"
)

// podRef names a pod as the commands take it: namespace/name, or the name alone in
// the default namespace.
type podRef struct{ Namespace, Name string }

func parsePodRef(arg string) (podRef, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok {
		ns, name = metav1.NamespaceDefault, arg
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return podRef{}, cli.Exit(fmt.Sprintf("%q is not a pod: give its name (web-node1) or namespace/name (kube-system/etcd-node1)", arg), ExitUsage)
	}
	return podRef{ns, name}, nil
}

func (r podRef) String() string { return r.Namespace + "/" + r.Name }

// splitArgs returns the command's arguments and what follows "--", after applying the
// flags found among the arguments: urfave/cli stops at the first argument, and kubectl
// users type `logs web-node1 -f`. One-letter bool flags may be joined (-it).
func splitArgs(c *cli.Context) (args, rest []string, err error) {
	in := c.Args().Slice()
	for i := 0; i < len(in); i++ {
		a := in[i]
		if a == "--" {
			return args, in[i+1:], nil
		}
		if len(a) < 2 || a[0] != '-' {
			args = append(args, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := lookupFlag(c.Command.Flags, name)
		if f == nil && !hasValue && !strings.HasPrefix(a, "--") && setShortBools(c, name) {
			continue
		}
		if f == nil {
			return nil, nil, cli.Exit(fmt.Sprintf("flag provided but not defined: %s (see 'staticpod %s --help')", a, c.Command.Name), ExitUsage)
		}
		if _, isBool := f.(*cli.BoolFlag); isBool && !hasValue {
			value = "true"
		} else if !hasValue {
			if i+1 == len(in) {
				return nil, nil, cli.Exit(fmt.Sprintf("flag needs an argument: %s", a), ExitUsage)
			}
			i++
			value = in[i]
		}
		if err := setFlag(c, f, value); err != nil {
			return nil, nil, err
		}
	}
	return args, nil, nil
}

func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// setShortBools sets each letter of -it as a bool flag, if every letter is one.
func setShortBools(c *cli.Context, letters string) bool {
	var fs []cli.Flag
	for _, l := range letters {
		f := lookupFlag(c.Command.Flags, string(l))
		if _, isBool := f.(*cli.BoolFlag); !isBool {
			return false
		}
		fs = append(fs, f)
	}
	for _, f := range fs {
		if setFlag(c, f, "true") != nil {
			return false
		}
	}
	return len(fs) > 0
}

// setFlag sets a flag under each of its names: urfave/cli keeps one value per alias.
func setFlag(c *cli.Context, f cli.Flag, value string) error {
	for _, n := range f.Names() {
		if err := c.Set(n, value); err != nil {
			return cli.Exit(fmt.Sprintf("invalid value %q for flag -%s: %v", value, n, err), ExitUsage)
		}
	}
	return nil
}

// podRequest is a client command's one POD argument, found through the API, with the
// context (cancelled by SIGINT and SIGTERM) its requests run under.
type podRequest struct {
	ctx  context.Context
	stop context.CancelFunc
	api  *client.Client
	ref  podRef
	pod  *corev1.Pod
}

// lookupPod parses a command's one POD argument and fetches the pod; the caller must
// call stop.
func lookupPod(c *cli.Context, command string) (*podRequest, error) {
	args, rest, err := splitArgs(c)
	if err != nil {
		return nil, err
	}
	if len(args) != 1 || len(rest) > 0 {
		return nil, cli.Exit(fmt.Sprintf("%s takes one POD (see 'staticpod %s --help')", command, command), ExitUsage)
	}
	ref, err := parsePodRef(args[0])
	if err != nil {
		return nil, err
	}
	api, err := newClient(c)
	if err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	pod, err := fetchPod(ctx, api, ref)
	if err != nil {
		stop()
		return nil, exitError(command, err)
	}
	return &podRequest{ctx: ctx, stop: stop, api: api, ref: ref, pod: pod}, nil
}
