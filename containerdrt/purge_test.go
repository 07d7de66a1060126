package containerdrt

import (
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/core/leases"
)

// TestPurgeNamespaceLeavesNothing purges a namespace that holds an image and a lease,
// as `staticpod once` leaves it once its containers are removed: the namespace is gone,
// and purging it again is no error.
func TestPurgeNamespaceLeavesNothing(t *testing.T) {
	r := newTestRuntime(t)
	d := ctd.Daemon(t)
	if _, err := d.Client.LeasesService().Create(r.ctx, leases.WithRandomID()); err != nil {
		t.Fatalf("create lease: %v", err)
	}
	if imgs, err := d.Client.ImageService().List(r.ctx); err != nil || len(imgs) == 0 {
		t.Fatalf("images before the purge: %d, %v; want the test image", len(imgs), err)
	}
	if err := r.PurgeNamespace(r.ctx); err != nil {
		t.Fatalf("PurgeNamespace: %v", err)
	}
	nss, err := d.Client.NamespaceService().List(r.ctx)
	if err != nil {
		t.Fatalf("list namespaces: %v", err)
	}
	if slices.Contains(nss, r.cfg.Namespace) {
		t.Errorf("namespace %s is still there after PurgeNamespace", r.cfg.Namespace)
	}
	if err := r.PurgeNamespace(r.ctx); err != nil {
		t.Errorf("PurgeNamespace of a namespace already gone: %v, want nil", err)
	}
}
