package containerdrt

import (
	"context"

	"github.com/staticpod/staticpod/containerdrt/images"
	"github.com/staticpod/staticpod/runner"
)

// What image garbage collection needs of containerd, which the image store measures,
// lists and deletes (images.Store); which images may go is the runner's decision
// (runner.ImageStore). Each call here gives the store staticpod's namespace and the
// call timeout, and classes its errors for the runner.

var _ runner.ImageStore = (*Runtime)(nil)

// ImageFS returns the usage of the fuller of the filesystems that hold containerd's
// content store and its snapshotter's snapshots (see images.Store.Usage).
func (r *Runtime) ImageFS(ctx context.Context) (runner.FSUsage, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	u, err := r.images.Usage(ctx)
	return u, convertErr(err)
}

// ListImages returns staticpod's images, one per config digest with every name that
// points to it (see images.Store.List).
func (r *Runtime) ListImages(ctx context.Context) ([]runner.StoredImage, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	list, err := r.images.List(ctx)
	return list, convertErr(err)
}

// RemoveImage deletes every name of img and returns once the image's blobs and unpacked
// layers that nothing else uses are gone (see images.Store.Remove).
func (r *Runtime) RemoveImage(ctx context.Context, img runner.StoredImage) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	return convertErr(r.images.Remove(ctx, img))
}

// ImageName is the name containerd stores a pod's image under, normalized as pulls
// normalize it ("busybox" -> "docker.io/library/busybox:latest"); "" for a string that
// names no image.
func (r *Runtime) ImageName(image string) string { return images.Name(image) }
