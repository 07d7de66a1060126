package once

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/containerdrt/images"
	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/internal/ctrd"
	"github.com/staticpod/staticpod/internal/helper"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/events"
	"github.com/staticpod/staticpod/runner/restrict"
)

// job is one run of once: what it set up, to use and then remove.
type job struct {
	c        *cli.Context
	log      *slog.Logger
	ns       string
	root     string
	logDir   string
	temp     []string      // directories once created, removed at the end
	ctrd     *ctrd.Process // the containerd once started; nil if it started none
	rt       *containerdrt.Runtime
	r        *runner.Runner
	pods     []*corev1.Pod         // as the manifests list them
	objects  manifests.Objects     // the ConfigMaps and Secrets they read
	restrict restrict.Restrictions // the sysctls the pods may set
	errOut   io.Writer
}

// do sets the run up, runs the pods until they are done (or ctx is), and returns the
// exit code.
func (j *job) do(ctx context.Context) (int, error) {
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
	} else if code == ExitTimeout {
		fmt.Fprintf(j.errOut, "staticpod once: %v; the pods were stopped\n", context.Cause(ctx))
	}
	printSummary(j.errOut, j.pods, final)
	return code, nil
}

// setup makes the run's directories and namespace, connects to containerd (starting
// one if asked) and creates the runner.
func (j *job) setup(ctx context.Context) error {
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
		j.ns = NamespacePrefix + randomHex(4)
	}
	address, err := shims.SocketPath(c.String("containerd-address"))
	if err != nil {
		return cli.Exit(fmt.Sprintf("--containerd-address: %v", err), spcli.ExitUsage)
	}
	j.log.Debug("once", "namespace", j.ns, "root", j.root, "logs", j.logDir, "containerd", address)
	if c.Bool("start-containerd") {
		// In a session of its own (as ctrd starts it): the terminal's Ctrl-C is for
		// once, which still needs containerd to clean up.
		if j.ctrd, err = ctrd.Under(filepath.Join(j.root, "containerd"), address, j.log).Start(ctx); err != nil {
			return cli.Exit(err.Error(), spcli.ExitUsage)
		}
	}
	self, err := helper.InstallUnder(j.root, j.log)
	if err != nil {
		return err
	}
	cfg := containerdrt.Config{
		Address: address, Namespace: j.ns, RootDir: j.root, PodLogDir: j.logDir, Self: self,
		Images: images.Config{
			RegistryConfig: c.String("registry-config"), InsecureRegistries: c.StringSlice("insecure-registry"),
			RegistryConfigDir: c.String("registry-config-dir"), ImageDir: c.String("image-dir"),
			CredentialProviderConfig: c.String("image-credential-provider-config"),
			CredentialProviderBinDir: c.String("image-credential-provider-bin-dir"),
		},
		SeccompDir:  filepath.Join(j.root, "seccomp"),
		CDISpecDirs: c.StringSlice("cdi-spec-dirs"),
		Logger:      j.log,
	}
	if j.rt, err = containerdrt.New(ctx, cfg); errors.Is(err, containerdrt.ErrConfig) {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	} else if err != nil {
		return cli.Exit(fmt.Sprintf("%v (is containerd running? --start-containerd starts one)", err), spcli.ExitUsage)
	}
	j.r, err = runner.New(runner.Options{
		Runtime: j.rt, Logger: j.log, RelistPeriod: c.Duration("pleg-relist-period"), HostIP: j.rt.HostIP(),
		Restrictions: j.restrict,
		Host:         runner.ProbeHost(),
	})
	return err
}

// dir makes a new directory of the run's own in parent (the system's temporary
// directory when ""), which the cleanup removes. It is never parent itself: pods from
// the same manifests have the same UIDs as a daemon's, and removing their data from a
// daemon's root dir would pull it from under the daemon's pods.
func (j *job) dir(parent string) (string, error) {
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", fmt.Errorf("once: %w", err)
		}
	}
	d, err := os.MkdirTemp(parent, NamespacePrefix)
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
func (j *job) run(ctx context.Context) ([]*corev1.Pod, error) {
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
func (j *job) runPods(runCtx context.Context) error {
	select {
	case <-j.rt.Images().Imported():
	case <-runCtx.Done():
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- j.r.Run(runCtx) }()
	if err := j.r.Update(runCtx, manifests.Update{Source: manifests.SourceFile, Pods: j.pods, Objects: j.objects}); err != nil && runCtx.Err() == nil {
		return err
	}
	return <-done
}

// wait follows the pods until every one is done or ctx is, and returns their last
// statuses.
func (j *job) wait(ctx context.Context, streams *logStreams, prog *progress, events <-chan events.Record) []*corev1.Pod {
	tick := time.NewTicker(poll)
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
func (j *job) statuses() []*corev1.Pod {
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
