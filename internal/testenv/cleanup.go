package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// Stop deletes every container the daemon still has, stops the daemon (SIGTERM, then
// SIGKILL), kills the shims it left behind and their processes, unmounts whatever is
// mounted under its directory and removes the directory. Later calls return the first
// call's result.
func (d *Daemon) Stop(ctx context.Context) error {
	d.stopOnce.Do(func() {
		d.stopped.Store(true)
		d.stopErr = d.stop(ctx)
	})
	return d.stopErr
}

func (d *Daemon) stop(ctx context.Context) error {
	var errs []error
	if d.Client != nil {
		if d.running() {
			err := d.purgeAll(ctx)
			if d.running() { // else it died while purging and killShims does the work
				errs = append(errs, err)
			}
		}
		d.Client.Close()
	}
	errs = append(errs, d.terminate(), killShims(d.Address))
	for _, ns := range d.ownedNamespaces() {
		errs = append(errs, removeHostState(ns))
	}
	errs = append(errs, unmountUnder(d.dir), d.removeDir())
	return errors.Join(errs...)
}

// purgeAll purges every namespace the daemon knows.
func (d *Daemon) purgeAll(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	nss, err := d.Client.NamespaceService().List(lctx)
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	var errs []error // each namespace within its own bound
	for _, ns := range nss {
		errs = append(errs, d.PurgeNamespace(ctx, ns))
	}
	return errors.Join(errs...)
}

// PurgeNamespace kills and deletes every task and container in ns, with their snapshots.
// For a namespace from Namespace it also removes the cgroups and runc state the namespace
// left on the host. Images stay until the daemon stops.
func (d *Daemon) PurgeNamespace(ctx context.Context, ns string) error {
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(ctx, ns), purgeTimeout)
	defer cancel()
	containers, err := d.Client.Containers(ctx)
	if err != nil {
		return fmt.Errorf("list containers in %s: %w", ns, err)
	}
	// At once: one by one, the kills and shim exits of twenty containers on a loaded
	// machine took longer than the bound.
	errs := make([]error, len(containers))
	var wg sync.WaitGroup
	for i, c := range containers {
		wg.Go(func() { errs[i] = deleteContainer(ctx, c) })
	}
	wg.Wait()
	if d.owns(ns) {
		errs = append(errs, removeHostState(ns))
	}
	return errors.Join(errs...)
}

// deleteContainer kills and deletes the container's task, if any, then the container and
// its snapshot.
func deleteContainer(ctx context.Context, c client.Container) error {
	task, err := c.Task(ctx, cio.Load) // Load: Delete removes the task's FIFOs
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("load task %s: %w", c.ID(), err)
	}
	if err == nil {
		if _, err := task.Delete(ctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete task %s: %w", c.ID(), err)
		}
	}
	if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete container %s: %w", c.ID(), err)
	}
	return nil
}

// terminate sends SIGTERM, and SIGKILL if the daemon has not exited after stopTimeout.
func (d *Daemon) terminate() error {
	if !d.running() {
		return nil
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("signal containerd %d: %w", d.cmd.Process.Pid, err)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-d.exited:
		return nil
	case <-timer.C:
	}
	d.cmd.Process.Kill()
	timer.Reset(stopTimeout)
	select {
	case <-d.exited:
		return fmt.Errorf("containerd %d ignored SIGTERM for %v and was killed", d.cmd.Process.Pid, stopTimeout)
	case <-timer.C:
		return fmt.Errorf("containerd %d survived SIGKILL for %v", d.cmd.Process.Pid, stopTimeout)
	}
}

// removeDir removes the daemon's directory, which must have nothing mounted under it.
func (d *Daemon) removeDir() error {
	if err := os.RemoveAll(d.dir); err != nil {
		return fmt.Errorf("remove containerd directory: %w", err)
	}
	return nil
}

// own records that Namespace handed out ns.
func (d *Daemon) own(ns string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.owned = append(d.owned, ns)
}

func (d *Daemon) owns(ns string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.owned, ns)
}

func (d *Daemon) ownedNamespaces() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.owned)
}
