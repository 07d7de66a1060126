package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	cimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"

	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/internal/proc"
)

// PurgeNamespace deletes the runtime's namespace: its images and leases first (their
// content and snapshots are collected at once), then the namespace itself, which
// containerd refuses while anything is left in it, so the containers must be removed
// before; then the shims containerd failed to shut down (see shims.Kill). It is for a namespace the caller owns alone, as `staticpod once` does; a
// namespace that is already gone is no error.
func (r *Runtime) PurgeNamespace(ctx context.Context) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	var errs []error
	imgs, err := r.client.ImageService().List(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list images: %w", convertErr(err)))
	}
	for _, img := range imgs {
		if err := ignoreNotFound(r.client.ImageService().Delete(ctx, img.Name, cimages.SynchronousDelete())); err != nil {
			errs = append(errs, fmt.Errorf("delete image %s: %w", img.Name, convertErr(err)))
		}
	}
	ls, err := r.client.LeasesService().List(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list leases: %w", convertErr(err)))
	}
	for _, l := range ls {
		if err := ignoreNotFound(r.client.LeasesService().Delete(ctx, l, leases.SynchronousDelete)); err != nil {
			errs = append(errs, fmt.Errorf("delete lease %s: %w", l.ID, convertErr(err)))
		}
	}
	if err := ignoreNotFound(r.client.NamespaceService().Delete(ctx, r.cfg.Namespace)); err != nil {
		errs = append(errs, fmt.Errorf("delete containerd namespace %s: %w", r.cfg.Namespace, convertErr(err)))
		return errors.Join(errs...)
	}
	if n := shims.Kill(proc.Root, r.cfg.Address, r.cfg.Namespace); n > 0 {
		r.log.Warn("killed shims containerd left behind", "namespace", r.cfg.Namespace, "shims", n)
		// A shim killed before it deleted its container leaves runc's state of it.
		entries, _ := os.ReadDir(filepath.Join(shims.RuncRoot, r.cfg.Namespace))
		for _, e := range entries {
			shims.RemoveStaleRuncState(shims.RuncRoot, r.cfg.Namespace, e.Name())
		}
	}
	return errors.Join(errs...)
}
