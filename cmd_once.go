package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

const (
	exitTimeout  = 124                    // --timeout ran out, as timeout(1) exits
	oncePoll     = 200 * time.Millisecond // how often once looks at the pods' statuses
	onceNSPrefix = "staticpod-once-"      // of the containerd namespace a run owns alone
)

func onceCommand() *cli.Command {
	return &cli.Command{
		Name:      "once",
		Usage:     "run manifests to completion, stream their logs, exit with their code",
		ArgsUsage: "PATH...",
		Description: "once runs the pods itself, without a daemon, in a containerd namespace of its own. It exits\n" +
			"when every Never/OnFailure pod has finished and every Always pod is Ready: 0 when all\n" +
			"succeeded, else the exit code of the first failing container; 124 when --timeout runs out.\n" +
			"Then it stops and removes every container, image, file and the namespace, unless --keep.",
		Flags:  onceFlags(),
		Action: runOnce,
	}
}

func onceFlags() []cli.Flag {
	str := func(name, value, usage string, aliases ...string) *cli.StringFlag {
		return &cli.StringFlag{Name: name, Value: value, Usage: usage, Aliases: aliases, EnvVars: spcli.Env(name)}
	}
	// No environment variable for the namespace and the directories: once must never
	// pick up a daemon's STATICPOD_CONTAINERD_NAMESPACE or STATICPOD_ROOT_DIR, and
	// delete what the daemon runs.
	private := func(name, usage string) *cli.StringFlag { return &cli.StringFlag{Name: name, Usage: usage} }
	namespace := private("containerd-namespace", "containerd namespace to use instead of a new "+onceNSPrefix+"<random> (deleted at the end)")
	namespace.Hidden = true
	return []cli.Flag{
		&cli.DurationFlag{Name: "timeout", Usage: "stop everything and exit 124 after this long (0: no limit)"},
		&cli.BoolFlag{Name: "keep", Usage: "leave the containers, their namespace and the files in place at the end"},
		spcli.NodeNameFlag(),
		str("containerd-address", spcli.DefaultContainerdAddress, "containerd's socket", "container-runtime-endpoint"),
		&cli.BoolFlag{Name: "start-containerd", Usage: "start a containerd under the root dir when none answers (stopped at the end)"},
		private("root-dir", "directory in which the run makes its own state directory (default: the system's temporary directory)"),
		private("pod-log-dir", "directory in which the run makes its own directory of CRI log files (default: under its state directory)"),
		str("image-dir", "", "directory of image tarballs imported before the pods start"),
		str("registry-config", "", "docker config.json with registry credentials"),
		&cli.StringSliceFlag{Name: "insecure-registry", Usage: "registry `host[:port]` or CIDR reached over plain HTTP (repeatable)"},
		str("log-level", "error", "level of staticpod's own log lines: debug, info, warn or error"),
		namespace,
		&cli.DurationFlag{Name: "pleg-relist-period", Value: defaultRelistPeriod, Hidden: true},
	}
}

// onceJob is one run of once: what it set up, to use and then remove.
type onceJob struct {
	c      *cli.Context
	log    *slog.Logger
	ns     string
	root   string
	logDir string
	temp   []string // directories once created, removed at the end
	stopCD func()   // stops the containerd once started; nil if it started none
	rt     *containerdrt.Runtime
	r      *runner.Runner
	pods   []*corev1.Pod // as the manifests list them
	errOut io.Writer
}

func runOnce(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.Exit("once needs at least one PATH (a manifest file or directory)", spcli.ExitUsage)
	}
	log, err := newLogger(c.String("log-level"), "text")
	if err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	node, err := spcli.NodeName(c)
	if err != nil {
		return cli.Exit(fmt.Sprintf("node name: %v", err), spcli.ExitUsage)
	}
	pods, err := loadPods(c.App.ErrWriter, c.Args().Slice(), node)
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
	j := &onceJob{c: c, log: log, pods: pods, errOut: c.App.ErrWriter}
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

// do sets the run up, runs the pods until they are done (or ctx is), and returns the
// exit code.
func (j *onceJob) do(ctx context.Context) (int, error) {
	if err := j.setup(ctx); err != nil {
		if code, ok := stopCode(ctx); ok {
			return code, nil
		}
		return 0, err
	}
	final, err := j.run(ctx)
	if err != nil {
		return 0, err
	}
	code, stopped := stopCode(ctx)
	if !stopped {
		code = exitCode(j.pods, final)
	} else if code == exitTimeout {
		fmt.Fprintf(j.errOut, "staticpod once: %v; the pods were stopped\n", context.Cause(ctx))
	}
	printSummary(j.errOut, j.pods, final)
	return code, nil
}

// interruptible returns a context that the first SIGINT or SIGTERM cancels with the
// signal as its cause; a second one ends staticpod at once, as without a handler.
func interruptible(parent context.Context, errOut io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs)
			fmt.Fprintf(errOut, "staticpod once: %v: stopping the pods and cleaning up (again to leave everything as it is)\n", s)
			cancel(signalError{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() { signal.Stop(sigs); close(done); cancel(nil) }
}

type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string { return e.sig.String() }

// stopCode is the exit code of a run that ctx stopped: 124 for the timeout, 128+N
// for signal N.
func stopCode(ctx context.Context) (int, bool) {
	var sig signalError
	switch cause := context.Cause(ctx); {
	case cause == nil:
		return 0, false
	case errors.As(cause, &sig):
		return 128 + int(sig.sig), true
	}
	return exitTimeout, true
}

// setup makes the run's directories and namespace, connects to containerd (starting
// one if asked) and creates the runner.
func (j *onceJob) setup(ctx context.Context) error {
	c := j.c
	var err error
	if j.root, err = j.dir(c.String("root-dir")); err != nil {
		return err
	}
	j.logDir = filepath.Join(j.root, "log", "pods")
	if parent := c.String("pod-log-dir"); parent != "" {
		if j.logDir, err = j.dir(parent); err != nil {
			return err
		}
	}
	if j.ns = c.String("containerd-namespace"); j.ns == "" {
		j.ns = onceNSPrefix + randomHex(4)
	}
	j.log.Debug("once", "namespace", j.ns, "root", j.root, "logs", j.logDir, "containerd", c.String("containerd-address"))
	if c.Bool("start-containerd") {
		if j.stopCD, err = startContainerd(ctx, j.root, c.String("containerd-address"), j.log); err != nil {
			return cli.Exit(err.Error(), spcli.ExitUsage)
		}
	}
	cfg := containerdrt.Config{
		Address: c.String("containerd-address"), Namespace: j.ns, RootDir: j.root, PodLogDir: j.logDir,
		Images: containerdrt.ImageConfig{
			RegistryConfig: c.String("registry-config"), InsecureRegistries: c.StringSlice("insecure-registry"),
			ImageDir: c.String("image-dir"),
		},
		SeccompDir: filepath.Join(j.root, "seccomp"),
		Logger:     j.log,
	}
	if j.rt, err = containerdrt.New(ctx, cfg); err != nil {
		return cli.Exit(fmt.Sprintf("%v (is containerd running? --start-containerd starts one)", err), spcli.ExitUsage)
	}
	j.r, err = runner.New(runner.Options{
		Runtime: j.rt, Logger: j.log, RelistPeriod: c.Duration("pleg-relist-period"), HostIP: j.rt.HostIP(),
	})
	return err
}

// dir makes a new directory of the run's own in parent (the system's temporary
// directory when ""), which the cleanup removes. It is never parent itself: pods from
// the same manifests have the same UIDs as a daemon's, and removing their data from a
// daemon's root dir would pull it from under the daemon's pods.
func (j *onceJob) dir(parent string) (string, error) {
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", fmt.Errorf("once: %w", err)
		}
	}
	d, err := os.MkdirTemp(parent, onceNSPrefix)
	if err == nil {
		d, err = filepath.Abs(d)
	}
	if err != nil {
		return "", fmt.Errorf("once: %w", err)
	}
	j.temp = append(j.temp, d)
	return d, nil
}

// run starts the runner with the pods, streams their logs and reports progress until
// every pod is done or ctx is, and returns the pods' last statuses, in manifest order.
// The runner is stopped when it returns; the containers are not.
func (j *onceJob) run(ctx context.Context) ([]*corev1.Pod, error) {
	runCtx, stopRunner := context.WithCancel(context.WithoutCancel(ctx))
	events, unsubscribe := j.r.Events().Subscribe()
	defer unsubscribe()
	errs := make(chan error, 2)
	go func() { errs <- j.rt.Images().Run(runCtx, nil) }()
	go func() { errs <- j.runPods(runCtx) }()
	streams := newLogStreams(j.logDir, j.c.App.Writer, j.errOut)
	prog := &progress{w: j.errOut, terminal: isTerminal(j.errOut), start: time.Now(), told: map[types.UID]string{}}
	final := j.wait(ctx, streams, prog, events)
	stopRunner()
	err := errors.Join(<-errs, <-errs)
	if !j.c.Bool("keep") {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		err = errors.Join(err, j.r.StopAll(stopCtx))
	}
	streams.finish(j.statuses()) // the containers' last lines, up to their end
	return final, err
}

// runPods runs the runner once the images of --image-dir are in, and gives it the
// pods.
func (j *onceJob) runPods(runCtx context.Context) error {
	select {
	case <-j.rt.Images().Imported():
	case <-runCtx.Done():
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- j.r.Run(runCtx) }()
	if err := j.r.Update(runCtx, manifests.Update{Source: manifests.SourceFile, Pods: j.pods}); err != nil && runCtx.Err() == nil {
		return err
	}
	return <-done
}

// wait follows the pods until every one is done or ctx is, and returns their last
// statuses.
func (j *onceJob) wait(ctx context.Context, streams *logStreams, prog *progress, events <-chan runner.Record) []*corev1.Pod {
	tick := time.NewTicker(oncePoll)
	defer tick.Stop()
	for {
		pods := j.statuses()
		streams.sync(pods)
		if prog.pods(j.pods, pods) {
			return pods
		}
		select {
		case <-ctx.Done():
			return pods
		case e := <-events:
			prog.event(e)
		case <-tick.C:
		}
	}
}

// statuses returns the runner's view of the run's pods, in manifest order; nil for a
// pod the runner has not reported yet.
func (j *onceJob) statuses() []*corev1.Pod {
	byUID := map[types.UID]*corev1.Pod{}
	for _, p := range j.r.Pods() {
		byUID[p.UID] = p
	}
	out := make([]*corev1.Pod, len(j.pods))
	for i, want := range j.pods {
		out[i] = byUID[want.UID]
	}
	return out
}

// done reports whether a pod is where once waits for it: finished for a Never or
// OnFailure pod, Ready for an Always pod.
func done(want, got *corev1.Pod) bool {
	switch {
	case got == nil:
		return false
	case want.Spec.RestartPolicy == corev1.RestartPolicyAlways:
		return spcli.ConditionTrue(got, corev1.PodReady)
	}
	return got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed
}

// exitCode is 0 when every pod is done and none failed, else the exit code of the
// first failing container, the pods taken in manifest order and init containers
// first; 1 when a failed pod shows no failing exit code.
func exitCode(want, got []*corev1.Pod) int {
	for i, pod := range got {
		if pod == nil || !done(want[i], pod) {
			return spcli.ExitInvalid
		}
		if pod.Status.Phase != corev1.PodFailed {
			continue
		}
		for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				if t.ExitCode%256 == 0 {
					return spcli.ExitInvalid // would read as success
				}
				return int(t.ExitCode)
			}
		}
		return spcli.ExitInvalid
	}
	return 0
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
