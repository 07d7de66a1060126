// Package once owns `staticpod once`: it runs the pods of some manifests to completion
// for CI, without a daemon, in a containerd namespace of its own; streams their logs;
// exits with the first failing container's code; and removes everything it made.
//
// It loads the manifests with watcher.Scan, runs them with a runner of its own, and
// prints with the printers of package cli. It talks to containerd only through
// containerdrt (and starts a private one through internal/ctrd): it must not import
// containerd's packages itself.
package once

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/containerdrt/images"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/restrict"
	"github.com/staticpod/staticpod/runner/sysctl"
)

const (
	// NamespacePrefix starts the name of the containerd namespace a run owns alone.
	NamespacePrefix = "staticpod-once-"

	// ExitTimeout is once's exit code when --timeout runs out, as timeout(1) exits.
	ExitTimeout = 124

	poll = 200 * time.Millisecond // how often once looks at the pods' statuses
	// cleanupTimeout bounds stopping the pods (their grace periods included) and
	// removing what the run left.
	cleanupTimeout = 3 * time.Minute
)

// Command is `staticpod once`.
func Command() *cli.Command {
	return &cli.Command{
		Name:      "once",
		Usage:     "run manifests to completion, stream their logs, exit with their code",
		ArgsUsage: "PATH...",
		Description: "once runs the pods itself, without a daemon, in a containerd namespace of its own. It exits\n" +
			"when every Never/OnFailure pod has finished and every Always pod is Ready: 0 when all\n" +
			"succeeded, else the exit code of the first failing container; 124 when --timeout runs out.\n" +
			"Then it stops and removes every container, image, file and the namespace, unless --keep.",
		Flags:  flags(),
		Action: run,
	}
}

func flags() []cli.Flag {
	str := func(name, value, usage string, aliases ...string) *cli.StringFlag {
		return &cli.StringFlag{Name: name, Value: value, Usage: usage, Aliases: aliases, EnvVars: spcli.Env(name)}
	}
	// No environment variable for the namespace and the directories: once must never
	// pick up a daemon's STATICPOD_CONTAINERD_NAMESPACE or STATICPOD_ROOT_DIR, and
	// delete what the daemon runs.
	private := func(name, usage string) *cli.StringFlag { return &cli.StringFlag{Name: name, Usage: usage} }
	namespace := private("containerd-namespace", "containerd namespace to use instead of a new "+NamespacePrefix+"<random> (deleted at the end)")
	namespace.Hidden = true
	return []cli.Flag{
		&cli.DurationFlag{Name: "timeout", Usage: "stop everything and exit 124 after this long (0: no limit)"},
		&cli.BoolFlag{Name: "keep", Usage: "leave the containers, their namespace and the files in place at the end"},
		spcli.NodeNameFlag(),
		spcli.AllowedUnsafeSysctlsFlag(),
		str("containerd-address", spcli.DefaultContainerdAddress, "containerd's socket", "container-runtime-endpoint"),
		&cli.BoolFlag{Name: "start-containerd", Usage: "start a containerd under the root dir when none answers (stopped at the end)"},
		private("root-dir", "directory in which the run makes its own state directory (default: the system's temporary directory)"),
		private("pod-log-dir", "directory in which the run makes its own directory of CRI log files (default: under its state directory)"),
		str("image-dir", "", "directory of image tarballs imported before the pods start"),
		str("registry-config", "", "docker config.json with registry credentials"),
		&cli.StringSliceFlag{Name: "insecure-registry", Usage: "registry `host[:port]` or CIDR reached over plain HTTP (repeatable)"},
		str("registry-config-dir", images.DefaultRegistryConfigDir, "containerd's registry host configuration, <dir>/<host>/hosts.toml: mirrors, CAs, client certificates, plain-HTTP hosts (\"\" for none)"),
		str("image-credential-provider-config", "", "the kubelet's CredentialProviderConfig file (or directory): credential provider plugins for pulls"),
		str("image-credential-provider-bin-dir", "", "directory of the credential provider plugins' binaries"),
		&cli.StringSliceFlag{Name: "cdi-spec-dirs", Value: cli.NewStringSlice(containerdrt.DefaultCDISpecDirs...), Usage: "directories of CDI specs, by rising priority, for the devices pods ask for with cdi.k8s.io/ annotations (repeatable)", EnvVars: spcli.Env("cdi-spec-dirs")},
		str("log-level", "error", "level of staticpod's own log lines: debug, info, warn or error"),
		namespace,
		&cli.DurationFlag{Name: "pleg-relist-period", Value: runner.DefaultRelistPeriod, Hidden: true},
	}
}

// run is once's action: it loads the manifests, runs the job under the signals and the
// timeout, cleans up (unless --keep) and exits with the job's code.
func run(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.Exit("once needs at least one PATH (a manifest file or directory)", spcli.ExitUsage)
	}
	log, err := newLogger(c.String("log-level"))
	if err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	node, err := spcli.NodeName(c)
	if err != nil {
		return cli.Exit(fmt.Sprintf("node name: %v", err), spcli.ExitUsage)
	}
	restrict := restrict.Restrictions{Sysctls: restrict.Sysctls{Kernel: sysctl.HostKernel(), AllowedUnsafe: spcli.AllowedUnsafeSysctls(c)}}
	if err := restrict.Validate(); err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	pods, objs, err := loadPods(c.App.ErrWriter, c.Args().Slice(), node)
	if err != nil {
		return err
	}
	ctx, stop := interruptible(c.Context, c.App.ErrWriter)
	defer stop()
	if d := c.Duration("timeout"); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d, fmt.Errorf("timed out after %v", d))
		defer cancel()
	}
	j := &job{c: c, log: log, pods: pods, objects: objs, restrict: restrict, errOut: c.App.ErrWriter}
	code, err := j.do(ctx)
	if c.Bool("keep") {
		j.tellKept()
	} else {
		cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if cerr := j.cleanup(cleanCtx); cerr != nil {
			fmt.Fprintf(j.errOut, "staticpod once: cleaning up: %v\n", cerr)
			code = max(code, spcli.ExitInvalid)
		}
	}
	if err != nil {
		return err
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// newLogger returns once's own log, in text on stderr, at level.
func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
