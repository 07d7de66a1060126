package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/internal/ctrd"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/watcher"

	"github.com/staticpod/staticpod/manifests"
)

// cleanupTimeout bounds stopping the pods (their grace periods included) and removing
// what the run left.
const cleanupTimeout = 3 * time.Minute

// Where runc and the cgroup driver keep what they make for a container, by namespace:
// runc's state under /run/containerd/runc/<ns>/<id>, and the default cgroup path
// /<ns>/<id>.
const (
	runcStateDir = "/run/containerd/runc"
	cgroupDir    = "/sys/fs/cgroup"
)

// loadPods reads the manifests at paths for node, in order. Nothing may run when any
// is invalid: every problem is printed, located, and it returns an exit of 1.
func loadPods(errOut io.Writer, paths []string, node string) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	var problems []string
	owner := map[string]string{} // namespace/name -> the file that defines it
	for _, path := range paths {
		if _, err := os.Stat(path); err != nil {
			return nil, cli.Exit(fmt.Sprintf("once: %v", err), spcli.ExitUsage)
		}
		snap, err := watcher.Scan(path, node)
		if err != nil {
			return nil, cli.Exit(fmt.Sprintf("once %s: %v", path, err), spcli.ExitUsage)
		}
		for _, f := range snap.Files {
			if f.ReadErr != nil {
				problems = append(problems, f.ReadErr.Error())
			}
			for _, p := range f.Result.Errors {
				problems = append(problems, p.Error())
			}
			for _, p := range f.Result.Warnings {
				fmt.Fprintf(errOut, "warning: %s\n", p.Error())
			}
			for _, pod := range f.Result.Pods {
				key := manifests.Key(pod)
				if first, ok := owner[key]; ok {
					problems = append(problems, fmt.Sprintf("%s: pod %s is already defined in %s", f.Path, key, first))
					continue
				}
				owner[key] = f.Path
				pods = append(pods, pod)
			}
		}
		for _, c := range snap.Conflicts {
			problems = append(problems, c.Error())
		}
	}
	for _, p := range problems {
		fmt.Fprintf(errOut, "error: %s\n", p)
	}
	if len(problems) > 0 {
		return nil, cli.Exit(fmt.Sprintf("once: %s; nothing was run", spcli.Count(len(problems), "error")), spcli.ExitInvalid)
	}
	if len(pods) == 0 {
		return nil, cli.Exit("once: no pods in "+strings.Join(paths, ", "), spcli.ExitInvalid)
	}
	return pods, nil
}

// startContainerd starts a containerd under root, listening at address, unless one
// answers there already, and returns the function that stops it (nil when it started
// none). It runs in a session of its own: the terminal's Ctrl-C is for once, which
// still needs containerd to clean up.
func startContainerd(ctx context.Context, root, address string, log *slog.Logger) (func(), error) {
	if ctrd.Serving(ctx, address, time.Second) == nil {
		return nil, nil
	}
	dir := filepath.Join(root, "containerd")
	cfg := ctrd.Config{Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"), Address: address}
	config := filepath.Join(dir, "config.toml")
	if err := cfg.WriteConfig(config); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return nil, fmt.Errorf("start containerd: %w (install it: apt-get install containerd runc)", err)
	}
	logPath := filepath.Join(dir, "containerd.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start containerd: %w", err)
	}
	cmd := exec.Command(bin, "--config", config)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start containerd: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logFile.Close(); close(exited) }()
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		os.Remove(address)
		os.Remove(address + ".ttrpc")
	}
	log.Debug("started containerd", "pid", cmd.Process.Pid, "address", address, "log", logPath)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := ctrd.AwaitServing(waitCtx, address, exited); err != nil {
		stop()
		return nil, fmt.Errorf("start containerd (see %s): %w", logPath, err)
	}
	return stop, nil
}

// cleanup removes every container and sandbox of the run with their files and logs,
// the namespace's images, leases and the namespace itself, what runc and the cgroups
// keep of it, the containerd once started, and the directories once created.
func (j *onceJob) cleanup(ctx context.Context) error {
	var errs []error
	if j.rt != nil {
		errs = append(errs, j.removeContainers(ctx), j.removeNamespace(ctx))
		j.rt.Close()
	}
	if j.stopCD != nil {
		j.stopCD()
	}
	if j.ns != "" {
		removeHostState(j.ns)
	}
	for _, d := range j.temp {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// removeContainers removes the containers, then the sandboxes, then each pod's data.
func (j *onceJob) removeContainers(ctx context.Context) error {
	all, err := j.rt.List(ctx)
	if err != nil {
		return err
	}
	sort.SliceStable(all, func(a, b int) bool {
		return all[a].Kind == runner.KindContainer && all[b].Kind == runner.KindSandbox
	})
	uids := map[types.UID]bool{}
	for _, p := range j.pods {
		uids[p.UID] = true
	}
	var errs []error
	for _, c := range all {
		errs = append(errs, j.rt.RemoveContainer(ctx, c.ID))
		uids[c.PodUID] = true
	}
	for uid := range uids {
		errs = append(errs, j.rt.RemovePodData(ctx, uid))
	}
	return errors.Join(errs...)
}

// removeNamespace deletes the namespace's images and leases (their content and
// snapshots are collected at once), then the namespace, which containerd refuses
// while anything is left in it.
func (j *onceJob) removeNamespace(ctx context.Context) error {
	cl := j.rt.Client()
	ctx = namespaces.WithNamespace(ctx, j.ns)
	var errs []error
	imgs, err := cl.ImageService().List(ctx)
	errs = append(errs, err)
	for _, img := range imgs {
		if err := cl.ImageService().Delete(ctx, img.Name, images.SynchronousDelete()); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete image %s: %w", img.Name, err))
		}
	}
	ls, err := cl.LeasesService().List(ctx)
	errs = append(errs, err)
	for _, l := range ls {
		if err := cl.LeasesService().Delete(ctx, l, leases.SynchronousDelete); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete lease %s: %w", l.ID, err))
		}
	}
	if err := cl.NamespaceService().Delete(ctx, j.ns); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete containerd namespace %s: %w", j.ns, err))
	}
	return errors.Join(errs...)
}

// removeHostState removes the directories runc and the cgroups keep for the namespace,
// once they are empty (rmdir refuses the others).
func removeHostState(ns string) {
	dirs, _ := filepath.Glob(filepath.Join(cgroupDir, "*", ns))
	for _, d := range append(dirs, filepath.Join(cgroupDir, ns), filepath.Join(runcStateDir, ns)) {
		_ = syscall.Rmdir(d)
	}
}

// tellKept says where --keep left everything.
func (j *onceJob) tellKept() {
	if j.rt != nil {
		j.rt.Close()
	}
	addr := j.c.String("containerd-address")
	fmt.Fprintf(j.errOut, "staticpod once: kept (--keep): containerd namespace %s (ctr -a %s -n %s containers ls), root dir %s, pod logs %s\n",
		j.ns, addr, j.ns, j.root, j.logDir)
	if j.stopCD != nil {
		fmt.Fprintf(j.errOut, "staticpod once: the containerd once started keeps running at %s\n", addr)
	}
}
