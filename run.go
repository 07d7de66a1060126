package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/httpsource"
	"github.com/staticpod/staticpod/internal/ctrd"
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

// runDaemon wires flags -> logger -> containerd -> runtime -> runner -> sources, under
// one context that SIGTERM and SIGINT cancel. On the way out the pods keep running
// (an upgrade of staticpod must not take a control plane down), unless
// --stop-pods-on-exit.
func runDaemon(c *cli.Context) error {
	log, err := newLogger(c.String("log-level"), c.String("log-format"))
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	node, err := nodeName(c)
	if err != nil {
		return cli.Exit(fmt.Sprintf("node name: %v", err), exitUsage)
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	root := c.String("root-dir")
	if c.Bool("start-containerd") {
		if err := superviseContainerd(ctx, c, root, log); err != nil {
			return err
		}
	}
	rt, err := containerdrt.New(ctx, runtimeConfig(c, root, log))
	if err != nil {
		return fmt.Errorf("%w (is containerd running? --start-containerd starts one)", err)
	}
	defer rt.Close()
	r, err := runner.New(runner.Options{
		Runtime:      rt,
		Logger:       log,
		RelistPeriod: c.Duration("pleg-relist-period"),
		HostIP:       rt.HostIP(),
		ResultsDir:   filepath.Join(root, "results"),
	})
	if err != nil {
		return err
	}
	log.Info("staticpod started", "version", version, "node", node, "manifests", c.String("pod-manifest-path"), "containerd", c.String("containerd-address"))
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return rt.Images().Run(ctx) })
	select { // pods start once the images shipped in --image-dir are in
	case <-rt.Images().Imported():
	case <-ctx.Done():
	}
	g.Go(func() error { return r.Run(ctx) })
	g.Go(func() error { return watchExits(ctx, rt, r, log) })
	files := &watcher.Watcher{Path: c.String("pod-manifest-path"), Node: node, Period: c.Duration("file-check-frequency"), Log: log}
	g.Go(func() error { return files.Run(ctx, fileSource(r)) })
	if url := c.String("manifest-url"); url != "" {
		src, err := urlSource(c, url, node, r, log)
		if err != nil {
			return cli.Exit(err.Error(), exitUsage)
		}
		g.Go(func() error { return src.Run(ctx, sourceUpdates(r, "http")) })
	}
	push, err := httpsource.NewPush(filepath.Join(root, "manifests"), node, log)
	if err != nil {
		return err
	}
	g.Go(func() error { return push.Run(ctx, sourceUpdates(r, "api")) })
	if c.Bool("start-containerd") {
		g.Go(func() error { return containerdSupervisor(c, root, log).Run(ctx) })
	}
	err = g.Wait()
	if c.Bool("stop-pods-on-exit") {
		log.Info("stopping every pod (--stop-pods-on-exit)")
		err = errors.Join(err, r.StopAll(context.WithoutCancel(ctx)))
	}
	if c.Bool("stop-pods-on-exit") {
		log.Info("staticpod stopped, and its pods")
	} else {
		log.Info("staticpod stopped; its pods keep running")
	}
	return err
}

// fileSource turns the watcher's snapshots into runner updates, and its failures into
// events on the pods they concern.
func fileSource(r *runner.Runner) func(context.Context, watcher.Update) error {
	return func(ctx context.Context, u watcher.Update) error {
		for _, f := range u.Failures {
			msg := strings.Join(f.Problems, "; ")
			r.Events().Add(runner.Record{Type: runner.EventWarning, Reason: "InvalidManifest", Message: msg, Source: "file"})
			for _, uid := range f.Kept {
				r.Events().Add(runner.Record{UID: uid, Type: runner.EventWarning, Reason: "InvalidManifest",
					Message: "manifest is invalid; the pod keeps running on its last good spec: " + msg, Source: "file"})
			}
		}
		return r.Update(ctx, runner.Update{Source: "file", Pods: u.Pods})
	}
}

// watchExits wakes the runner's PLEG when containerd reports a task exit, so a
// crashed container restarts without waiting for the next relist. Polling stays the
// correctness path: a broken subscription is retried, and never stops staticpod.
func watchExits(ctx context.Context, rt *containerdrt.Runtime, r *runner.Runner, log *slog.Logger) error {
	for ctx.Err() == nil {
		if err := rt.WatchExits(ctx, r.Wake); err != nil {
			log.Debug("task exit events interrupted; relisting still polls", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
	return nil
}

// sourceUpdates hands an HTTP source's snapshots to the runner.
func sourceUpdates(r *runner.Runner, source string) func(context.Context, httpsource.Update) error {
	return func(ctx context.Context, u httpsource.Update) error {
		return r.Update(ctx, runner.Update{Source: source, Pods: u.Pods})
	}
}

// urlSource is the --manifest-url source; its failures become events.
func urlSource(c *cli.Context, url, node string, r *runner.Runner, log *slog.Logger) (*httpsource.URLSource, error) {
	headers, err := httpsource.ParseHeaders(c.StringSlice("manifest-url-header"))
	if err != nil {
		return nil, fmt.Errorf("--manifest-url-header: %w", err)
	}
	return &httpsource.URLSource{
		URL: url, Headers: headers, Period: c.Duration("http-check-frequency"), Node: node,
		CAFile: c.String("manifest-url-ca-file"), Log: log,
		OnError: func(err error) {
			if err == nil {
				r.Events().Add(runner.Record{Type: runner.EventNormal, Reason: "SourceRecovered", Message: "manifest URL answers again", Source: "http"})
				return
			}
			r.Events().Add(runner.Record{Type: runner.EventWarning, Reason: "SourceFailed", Message: err.Error() + "; the last good manifests stay in force", Source: "http"})
		},
	}, nil
}

func runtimeConfig(c *cli.Context, root string, log *slog.Logger) containerdrt.Config {
	return containerdrt.Config{
		Address:   c.String("containerd-address"),
		Namespace: c.String("containerd-namespace"),
		RootDir:   root,
		PodLogDir: c.String("pod-log-dir"),
		Log: containerdrt.LogConfig{
			MaxSize:       c.Int64("container-log-max-size"),
			MaxFiles:      c.Int("container-log-max-files"),
			ContainersDir: c.String("container-log-dir"),
		},
		Images: containerdrt.ImageConfig{
			RegistryConfig:     c.String("registry-config"),
			InsecureRegistries: c.StringSlice("insecure-registry"),
			ImageDir:           c.String("image-dir"),
		},
		SeccompDir: filepath.Join(root, "seccomp"),
		Logger:     log,
	}
}

func containerdSupervisor(c *cli.Context, root string, log *slog.Logger) *ctrd.Supervisor {
	dir := filepath.Join(root, "containerd")
	return &ctrd.Supervisor{
		Config: ctrd.Config{
			Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"),
			Address: c.String("containerd-address"),
		},
		ConfigPath: filepath.Join(dir, "config.toml"),
		LogPath:    filepath.Join(dir, "containerd.log"),
		Log:        log,
	}
}

// superviseContainerd starts a private containerd under the root dir unless one
// answers at --containerd-address.
func superviseContainerd(ctx context.Context, c *cli.Context, root string, log *slog.Logger) error {
	return containerdSupervisor(c, root, log).Ensure(ctx)
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
