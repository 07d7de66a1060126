package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/staticpod/staticpod/api"
	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/httpsource"
	"github.com/staticpod/staticpod/internal/ctrd"
	"github.com/staticpod/staticpod/internal/helper"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/watcher"
)

var _ runner.Runtime = (*containerdrt.Runtime)(nil)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:   "run",
		Usage:  "run the pods of a manifest directory and keep them running",
		Flags:  runFlags(),
		Action: runDaemon,
	}
}

// daemon is staticpod run's parts, wired from the flags.
type daemon struct {
	c     *cli.Context
	log   *slog.Logger
	node  string
	root  string
	rt    *containerdrt.Runtime
	r     *runner.Runner
	api   *api.Server
	push  *httpsource.Push
	url   *httpsource.URLSource // nil without --manifest-url
	disks *diskWatch            // the log and root dirs' filesystems

	headers  http.Header         // --manifest-url-header
	restrict runner.Restrictions // --privileged-sources and the like
}

// runDaemon wires flags -> logger -> containerd -> runtime -> runner -> API -> sources,
// under one context that SIGTERM and SIGINT cancel. On the way out the pods keep
// running (an upgrade of staticpod must not take a control plane down), unless
// --stop-pods-on-exit.
func runDaemon(c *cli.Context) error {
	log, err := newLogger(c.String("log-level"), c.String("log-format"))
	if err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	leanHeap()
	node, err := spcli.NodeName(c)
	if err != nil {
		return cli.Exit(fmt.Sprintf("node name: %v", err), spcli.ExitUsage)
	}
	headers, err := httpsource.ParseHeaders(c.StringSlice("manifest-url-header"))
	if err != nil {
		return cli.Exit(fmt.Sprintf("--manifest-url-header: %v", err), spcli.ExitUsage)
	}
	if err := imageGCPolicy(c).Validate(); err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	restrict, err := spcli.Restrictions(c)
	if err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	d := &daemon{c: c, log: log, node: node, root: c.String("root-dir"), headers: headers, restrict: restrict}
	if err := d.setup(ctx); err != nil {
		return err
	}
	defer d.rt.Close()
	log.Info("staticpod started", "version", version, "node", node, "manifests", c.String("pod-manifest-path"),
		"containerd", c.String("containerd-address"), "api", c.String("api-socket"))
	err = d.run(ctx)
	switch {
	case err != nil:
		// A daemon that failed (another one holds its API socket, say) may not be the
		// one that runs these pods: it never stops them.
		log.Info("staticpod failed; its pods keep running, --stop-pods-on-exit or not")
	case c.Bool("stop-pods-on-exit"):
		log.Info("stopping every pod (--stop-pods-on-exit)")
		err = d.r.StopAll(context.WithoutCancel(ctx))
		log.Info("staticpod stopped, and its pods")
	default:
		log.Info("staticpod stopped; its pods keep running")
	}
	return err
}

// setup connects to containerd (starting one with --start-containerd) and makes the
// runtime, the runner, the push store and the API server.
func (d *daemon) setup(ctx context.Context) error {
	c := d.c
	if c.Bool("start-containerd") {
		if err := containerdSupervisor(c, d.root, d.log).Ensure(ctx); err != nil {
			return err
		}
	}
	self, err := helper.InstallUnder(d.root, d.log)
	if err != nil {
		return err
	}
	if c.Bool("cni-default-bridge") {
		if err := d.defaultNetwork(); err != nil {
			return err
		}
	}
	rt, err := containerdrt.New(ctx, runtimeConfig(c, d.root, self, d.log))
	if errors.Is(err, containerdrt.ErrConfig) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w (is containerd running? --start-containerd starts one)", err)
	}
	d.rt = rt
	reg := prometheus.NewRegistry()
	d.r, err = runner.New(runner.Options{
		Runtime: rt, Logger: d.log, RelistPeriod: c.Duration("pleg-relist-period"), HostIP: rt.HostIP(),
		ResultsDir: filepath.Join(d.root, "results"), Registry: reg,
		Images: rt, ImageGC: imageGCPolicy(c), Sources: d.sources(), Restrictions: d.restrict,
	})
	if err != nil {
		return errors.Join(err, rt.Close())
	}
	dirs := map[string]string{"root": d.root}
	if logDir := c.String("pod-log-dir"); logDir != "" {
		dirs["log"] = logDir
	}
	d.disks = newDiskWatch(dirs, d.r.Events(), reg, d.log)
	if d.push, err = httpsource.NewPush(filepath.Join(d.root, "manifests"), d.node, d.log); err != nil {
		return errors.Join(err, rt.Close())
	}
	d.api, err = api.New(api.Config{
		Backend: d.r, Store: d.push, Sources: d.sources(), PodLogDir: c.String("pod-log-dir"),
		RuntimeHealthy: rt.Healthy, Images: d.r, Objects: d.r,
		Registry: reg, Log: d.log,
		Socket: c.String("api-socket"), Listen: c.String("listen"), TokenFile: c.String("api-token-file"),
	})
	if err != nil {
		return errors.Join(err, rt.Close())
	}
	// Before anything lists, reaps or starts: a second staticpod stops here.
	if err := d.api.Listen(); err != nil {
		return errors.Join(err, rt.Close())
	}
	if url := c.String("manifest-url"); url != "" {
		d.url = &httpsource.URLSource{
			URL: url, Headers: d.headers, Period: c.Duration("http-check-frequency"), Node: d.node,
			CAFile: c.String("manifest-url-ca-file"), Log: d.log,
		}
	}
	return nil
}

// defaultNetwork writes the default pod network's configuration (--cni-default-bridge)
// into --cni-conf-dir, unless that holds one.
func (d *daemon) defaultNetwork() error {
	dir := d.c.String("cni-conf-dir")
	if dir == "" {
		return cli.Exit("--cni-default-bridge needs a --cni-conf-dir", spcli.ExitUsage)
	}
	if containerdrt.HasCNIConfig(dir) {
		return nil
	}
	b, err := containerdrt.DefaultBridge(d.root)
	if err != nil {
		return err
	}
	path, err := containerdrt.WriteDefaultCNIConfig(dir, b)
	if err == nil && path != "" {
		d.log.Info("wrote the default pod network's configuration", "file", path, "bridge", b.Bridge, "subnet", b.Subnet)
	}
	return err
}

// sources are the manifest sources switched on; /readyz waits for each.
func (d *daemon) sources() []string {
	if d.c.String("manifest-url") != "" {
		return []string{"file", "http", "api"}
	}
	return []string{"file", "api"}
}

// run runs every part until ctx is done or one fails. Pods start once the images
// shipped in --image-dir are in.
func (d *daemon) run(ctx context.Context) error {
	c := d.c
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return d.rt.Images().Run(ctx, d.r.ImagesArrived)
	})
	g.Go(func() error { return d.api.Run(ctx) })
	g.Go(func() error { return d.disks.Run(ctx) })
	select {
	case <-d.rt.Images().Imported():
	case <-ctx.Done():
	}
	g.Go(func() error { return d.r.Run(ctx) })
	if c.Bool("pleg-exit-events") {
		g.Go(func() error { return watchExits(ctx, d.rt, d.r, d.log) })
	}
	files := &watcher.Watcher{Path: c.String("pod-manifest-path"), Node: d.node, Period: c.Duration("file-check-frequency"), Log: d.log}
	g.Go(func() error { return files.Run(ctx, d.r.Update) })
	if d.url != nil {
		g.Go(func() error { return d.url.Run(ctx, d.r.Update) })
	}
	g.Go(func() error { return d.push.Run(ctx, d.r.Update) })
	if c.Bool("start-containerd") {
		g.Go(func() error { return containerdSupervisor(c, d.root, d.log).Run(ctx) })
	}
	return g.Wait()
}

// runtimeConfig is the runtime's configuration from run's flags; self is the program
// to run as log writer and sandbox, helper.InstallUnder's.
func runtimeConfig(c *cli.Context, root, self string, log *slog.Logger) containerdrt.Config {
	return containerdrt.Config{
		Address:   c.String("containerd-address"),
		Namespace: c.String("containerd-namespace"),
		RootDir:   root,
		PodLogDir: c.String("pod-log-dir"),
		Self:      self,
		Log: containerdrt.LogConfig{
			MaxSize:       c.Int64("container-log-max-size"),
			MaxFiles:      c.Int("container-log-max-files"),
			ContainersDir: c.String("container-log-dir"),
		},
		Images: containerdrt.ImageConfig{
			RegistryConfig:           c.String("registry-config"),
			RegistryConfigDir:        c.String("registry-config-dir"),
			InsecureRegistries:       c.StringSlice("insecure-registry"),
			ImageDir:                 c.String("image-dir"),
			CredentialProviderConfig: c.String("image-credential-provider-config"),
			CredentialProviderBinDir: c.String("image-credential-provider-bin-dir"),
		},
		SeccompDir: filepath.Join(root, "seccomp"),
		CNI: containerdrt.CNIConfig{
			ConfDir: c.String("cni-conf-dir"), BinDirs: c.StringSlice("cni-bin-dir"),
			CacheDir: filepath.Join(root, "cni", "cache"),
		},
		Logger: log,
	}
}

// imageGCPolicy is image garbage collection's policy from run's flags.
func imageGCPolicy(c *cli.Context) runner.ImageGCPolicy {
	return runner.ImageGCPolicy{
		HighThresholdPercent: c.Int("image-gc-high-threshold"),
		LowThresholdPercent:  c.Int("image-gc-low-threshold"),
		MinAge:               c.Duration("image-minimum-gc-age"),
	}
}

func containerdSupervisor(c *cli.Context, root string, log *slog.Logger) *ctrd.Supervisor {
	return ctrd.Under(filepath.Join(root, "containerd"), c.String("containerd-address"), log)
}

// newLogger returns the daemon's structured logger on stderr.
func newLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

// daemonGCPercent is the daemon's GOGC unless its environment sets one. Idle, the
// daemon allocates little (a relist a second), so collecting twice as often costs next
// to nothing and keeps its heap about 3 MiB smaller with 20 pods (measured: 12.5 MiB of
// anonymous memory at GOGC=100, 9.8 at 50).
const daemonGCPercent = 50

// leanHeap sets daemonGCPercent unless GOGC is set.
func leanHeap() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(daemonGCPercent)
	}
}
