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
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api"
	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/containerdrt/images"
	"github.com/staticpod/staticpod/containerdrt/podnet"
	"github.com/staticpod/staticpod/containerdrt/stats"
	"github.com/staticpod/staticpod/httpsource"
	"github.com/staticpod/staticpod/internal/buildinfo"
	"github.com/staticpod/staticpod/internal/ctrd"
	"github.com/staticpod/staticpod/internal/dirlock"
	"github.com/staticpod/staticpod/internal/diskspace"
	"github.com/staticpod/staticpod/internal/gcpace"
	"github.com/staticpod/staticpod/internal/helper"
	"github.com/staticpod/staticpod/internal/nodeshutdown"
	"github.com/staticpod/staticpod/internal/service"
	"github.com/staticpod/staticpod/internal/systemd"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/devices"
	"github.com/staticpod/staticpod/runner/restrict"
	"github.com/staticpod/staticpod/runner/revisions"
	"github.com/staticpod/staticpod/validate"
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
	self  *corev1.Node // the node the pods are admitted on (--node-labels and the like); served on GET /node
	root  string
	rt    *containerdrt.Runtime
	r     *runner.Runner
	api   *api.Server
	stats *stats.Sampler // what pods use, from their cgroups, for the API
	push  *httpsource.Push
	url   *httpsource.URLSource  // nil without --manifest-url
	svc   *service.Service       // systemd's notify protocol
	down  *nodeshutdown.Shutdown // nil without --shutdown-grace-period or logind
	disks *diskspace.Watch       // the log and root dirs' filesystems
	devs  *devices.Manager       // nil without --device-plugin-dir
	heap  *gcpace.Pacer          // the collector's pace; nil when GOGC is set

	grace runner.ShutdownGrace // --shutdown-grace-period and its critical part

	headers  http.Header           // --manifest-url-header
	restrict restrict.Restrictions // --privileged-sources and the like
}

// runDaemon wires flags -> logger -> containerd -> runtime -> runner -> API -> sources,
// under one context that SIGTERM and SIGINT cancel. On the way out the pods keep
// running (an upgrade of staticpod must not take a control plane down), unless
// errStoppedEarly is setup's when the daemon is told to stop before containerd
// answered: it stops as at any other time, without an error.
var errStoppedEarly = errors.New("stopped before containerd answered")

// --stop-pods-on-exit.
func runDaemon(c *cli.Context) error {
	log, err := systemd.NewLogger(c.String("log-level"), c.String("log-format"))
	if err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	node, err := spcli.NodeName(c)
	if err != nil {
		return cli.Exit(fmt.Sprintf("node name: %v", err), spcli.ExitUsage)
	}
	if err := spcli.AbsoluteDirs(c, "root-dir", "run-dir", "pod-log-dir", "container-log-dir", "image-dir"); err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	headers, err := httpsource.ParseHeaders(c.StringSlice("manifest-url-header"))
	if err != nil {
		return cli.Exit(fmt.Sprintf("--manifest-url-header: %v", err), spcli.ExitUsage)
	}
	if err := imageGCPolicy(c).Validate(); err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	restrict, err := validate.Restrictions(c)
	if err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	self, err := validate.Node(c, node, true)
	if err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	if _, err := cgroups.ParseDriver(c.String("cgroup-driver")); err != nil {
		return cli.Exit("--cgroup-driver: "+err.Error(), spcli.ExitUsage)
	}
	grace, err := nodeshutdown.Grace(c.Duration("shutdown-grace-period"), c.Duration("shutdown-grace-period-critical-pods"))
	if err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	lock, err := lockDirs(c)
	if err != nil {
		return err
	}
	defer lock.Release()
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	d := &daemon{c: c, log: log, node: node, self: self, root: c.String("root-dir"), headers: headers, restrict: restrict, grace: grace,
		heap: gcpace.ForDaemon()}
	if err := d.setup(ctx); errors.Is(err, errStoppedEarly) {
		log.Info("stopped before containerd answered")
		return nil
	} else if err != nil {
		return err
	}
	defer d.rt.Close()
	driver, cgroupRoot := d.rt.Cgroups()
	log.Info("staticpod started", "version", buildinfo.Version, "commit", buildinfo.Get().Commit, "node", node, "manifests", c.String("pod-manifest-path"),
		"containerd", c.String("containerd-address"), "api", c.String("api-socket"),
		"cgroup-driver", driver, "cgroup-root", cgroupRoot)
	err = d.run(ctx)
	d.svc.Stopping()
	switch {
	case err != nil:
		// A daemon that failed (another one holds its API socket, say) may not be the
		// one that runs these pods: it never stops them.
		log.Info("staticpod failed; its pods keep running, --stop-pods-on-exit or not")
	case d.down != nil && d.down.Stopped():
		log.Info("staticpod stopped; it stopped the pods for the machine's shutdown")
	case c.Bool("stop-pods-on-exit"):
		log.Info("stopping every pod (--stop-pods-on-exit)")
		err = d.r.StopAll(context.WithoutCancel(ctx))
		log.Info("staticpod stopped, and its pods")
	default:
		log.Info("staticpod stopped; its pods keep running")
	}
	return err
}

// lockDirs takes the root dir's, the run dir's and the pod log dir's locks, before anything (a
// private containerd, the runtime, a relist that removes the data of pods it does not
// know) touches them: a second staticpod on either, whatever its containerd namespace,
// stops here and touches nothing.
func lockDirs(c *cli.Context) (*dirlock.Lock, error) {
	runDir := spcli.RunDir(c.String("run-dir"), c.String("root-dir"))
	if err := os.MkdirAll(runDir, 0o700); err != nil { // root's alone, as the API socket's directory
		return nil, err
	}
	dirs := []string{c.String("root-dir"), runDir}
	if logDir := c.String("pod-log-dir"); logDir != "" {
		dirs = append(dirs, logDir)
	}
	lock, err := dirlock.Acquire(dirs...)
	var held *dirlock.HeldError
	if errors.As(err, &held) {
		return nil, cli.Exit(fmt.Sprintf("%v; this one stops, touching nothing: give it a --root-dir, a --run-dir and a --pod-log-dir of its own", err), spcli.ExitUsage)
	}
	return lock, err
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
	if err != nil && ctx.Err() != nil {
		return errStoppedEarly // told to stop: nothing runs yet, and containerd is not at fault
	}
	if err != nil {
		return fmt.Errorf("%w (is containerd running? --start-containerd starts one)", err)
	}
	d.rt = rt
	reg := prometheus.NewRegistry()
	d.svc = service.New(d.sources(), d.log)
	revs, err := revisions.Open(revisions.Options{
		Dir: filepath.Join(d.root, "revisions"), Deadline: c.Duration("progress-deadline"), Registry: reg, Log: d.log,
	})
	if err != nil {
		return errors.Join(err, rt.Close())
	}
	devCfg := devices.Config{Dir: c.String("device-plugin-dir"), Checkpoint: filepath.Join(d.root, "device-plugins", "checkpoint"), Log: d.log}
	if d.devs, err = devices.New(devCfg); err != nil {
		return errors.Join(err, rt.Close())
	}
	host := runner.ProbeHost()
	host.Node = d.self
	d.r, err = runner.New(runner.Options{
		Runtime: rt, Logger: d.log, RelistPeriod: c.Duration("pleg-relist-period"), HostIP: rt.HostIP(),
		ResultsDir: filepath.Join(d.root, "results"), Revisions: revs, Registry: reg,
		Images: rt, ImageGC: imageGCPolicy(c), Sources: d.sources(), Restrictions: d.restrict,
		Host: host, Heartbeat: d.svc.Heartbeat, Devices: d.devs, Busy: d.heap.Work,
	})
	if err != nil {
		return errors.Join(err, rt.Close())
	}
	d.svc.Runner = d.r
	dirs := map[string]string{"root": d.root}
	if logDir := c.String("pod-log-dir"); logDir != "" {
		dirs["log"] = logDir
	}
	d.disks = diskspace.New(dirs, d.r.Events(), reg, d.log)
	if d.push, err = httpsource.NewPush(filepath.Join(d.root, "manifests"), d.node, d.log); err != nil {
		return errors.Join(err, rt.Close())
	}
	// A push may not take a UID another pod has; one made while staticpod starts waits
	// until that is known.
	d.push.Holder, d.push.HolderKnown = d.r.UIDHolder, d.r.UIDsKnown()
	driver, cgroupRoot := rt.Cgroups()
	podCgroups, err := cgroups.New(cgroups.Config{Driver: driver, Root: cgroupRoot})
	if err != nil {
		return errors.Join(err, rt.Close())
	}
	d.stats = stats.New(stats.Config{Pods: d.r.Pods, Cgroups: podCgroups, Node: d.node, PodLogDir: c.String("pod-log-dir"),
		Disks: rt, RootDir: d.root, Log: d.log})
	d.api, err = api.New(api.Config{
		Backend: d.r, Store: d.push, Sources: d.sources(), PodLogDir: c.String("pod-log-dir"),
		RuntimeHealthy: rt.Healthy, Images: d.r, Objects: d.r, Exec: rt, Stats: d.stats, Node: d.self,
		Registry: reg, Log: d.log,
		Socket: c.String("api-socket"), Listen: c.String("listen"), TokenFile: c.String("api-token-file"),
		TLSCertFile: c.String("tls-cert-file"), TLSKeyFile: c.String("tls-private-key-file"),
	})
	if err != nil {
		return errors.Join(err, rt.Close())
	}
	// Before anything lists, reaps or starts: a second staticpod stops here.
	if err := d.api.Listen(); err != nil {
		return errors.Join(err, rt.Close())
	}
	if d.grace.Total > 0 {
		// Without logind (no systemd, no system bus) staticpod runs on, as the
		// kubelet does, and a shutdown stops the pods as whatever stops the machine does.
		if d.down, err = nodeshutdown.New(ctx, d.grace, d.r, d.svc.Idle, d.log); err != nil {
			d.log.Warn("graceful node shutdown is off", "err", err)
		}
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
	if podnet.HasConfig(dir) {
		return nil
	}
	b, err := podnet.DefaultBridge(d.root)
	if err != nil {
		return err
	}
	path, err := podnet.WriteDefaultConfig(dir, b)
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
	g.Go(func() error { return d.devs.Run(ctx) })
	g.Go(func() error { return d.disks.Run(ctx) })
	g.Go(func() error { return d.stats.Run(ctx) })
	g.Go(func() error { d.heap.Run(ctx); return nil })
	select {
	case <-d.rt.Images().Imported():
	case <-ctx.Done():
	}
	// The sync loop has a context of its own: a shutdown of the machine stops it first,
	// so that nothing restarts the pods it then stops.
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	loopDone := make(chan struct{})
	g.Go(func() error {
		defer close(loopDone)
		return d.r.Run(loopCtx)
	})
	if d.down != nil {
		g.Go(func() error {
			return d.down.Run(ctx, func() {
				stopLoop()
				<-loopDone
			})
		})
	}
	// The exit watch also records OOM kills and changes of container records: it runs
	// without --pleg-exit-events too, which then only keeps the PLEG from being woken.
	wake := d.r.Wake
	if !c.Bool("pleg-exit-events") {
		wake = func() {}
	}
	g.Go(func() error { return watchExits(ctx, d.rt, wake, d.log) })
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
		RunDir:    spcli.RunDir(c.String("run-dir"), root),
		PodLogDir: c.String("pod-log-dir"),
		Self:      self,
		Log: containerdrt.LogConfig{
			MaxSize:       c.Int64("container-log-max-size"),
			MaxFiles:      c.Int("container-log-max-files"),
			ContainersDir: c.String("container-log-dir"),
		},
		Images: images.Config{
			RegistryConfig:           c.String("registry-config"),
			RegistryConfigDir:        c.String("registry-config-dir"),
			InsecureRegistries:       c.StringSlice("insecure-registry"),
			ImageDir:                 c.String("image-dir"),
			CredentialProviderConfig: c.String("image-credential-provider-config"),
			CredentialProviderBinDir: c.String("image-credential-provider-bin-dir"),
		},
		SeccompDir:  filepath.Join(root, "seccomp"),
		CDISpecDirs: c.StringSlice("cdi-spec-dirs"),
		Cgroups:     cgroupConfig(c), RuntimeHandlers: c.StringSlice("runtime-handler"),
		CNI: podnet.Config{
			ConfDir: c.String("cni-conf-dir"), BinDirs: c.StringSlice("cni-bin-dir"),
			CacheDir: filepath.Join(root, "cni", "cache"),
		},
		Logger: log,
	}
}

// cgroupConfig places the pods' cgroups from run's flags (checked in runDaemon).
func cgroupConfig(c *cli.Context) cgroups.Config {
	driver, _ := cgroups.ParseDriver(c.String("cgroup-driver"))
	return cgroups.Config{Driver: driver, Root: c.String("cgroup-root"), PodMaxPIDs: c.Int64("pod-max-pids")}
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
