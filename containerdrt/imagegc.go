package containerdrt

import (
	"context"
	"fmt"
	"slices"

	"github.com/containerd/containerd/v2/client"
	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/staticpod/staticpod/runner"
)

// What image garbage collection needs of containerd: the filesystems that hold its
// content store and its snapshotter's layers, the images with their sizes, and
// deletions that return once the space is free. Which images may go is the runner's
// decision (runner.ImageStore); this file only measures, lists and deletes.

var _ runner.ImageStore = (*Runtime)(nil)

// Plugin types whose roots hold images: content (blobs) and snapshots (unpacked layers).
const (
	contentPluginType     = "io.containerd.content.v1"
	snapshotterPluginType = "io.containerd.snapshotter.v1"
)

// ImageFS returns the usage of the fuller of the filesystems that hold containerd's
// content store and its snapshotter's snapshots (one and the same, usually: both are
// under containerd's --root). Their paths come from containerd's introspection service,
// which reports each plugin's root, so that this holds for any containerd, started by
// staticpod or not.
func (r *Runtime) ImageFS(ctx context.Context) (runner.FSUsage, error) {
	roots, err := r.imageRoots(ctx)
	if err != nil {
		return runner.FSUsage{}, err
	}
	var fullest runner.FSUsage
	for _, root := range roots {
		u, err := statFS(root)
		if err != nil {
			return runner.FSUsage{}, err
		}
		if fullest.Capacity == 0 || u.Percent() > fullest.Percent() {
			fullest = u
		}
	}
	return fullest, nil
}

// imageRoots returns the roots of containerd's content plugin and of the snapshotter
// staticpod unpacks images for.
func (r *Runtime) imageRoots(ctx context.Context) ([]string, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	resp, err := r.client.IntrospectionService().Plugins(ctx, "type=="+contentPluginType, "type=="+snapshotterPluginType)
	if err != nil {
		return nil, fmt.Errorf("list containerd's plugins: %w", convertErr(err))
	}
	snapshotter := r.cfg.Images.Snapshotter
	if snapshotter == "" {
		snapshotter = defaults.DefaultSnapshotter
	}
	var roots []string
	for _, p := range resp.Plugins {
		root := p.Exports["root"]
		if root == "" || p.Type == snapshotterPluginType && p.ID != snapshotter {
			continue
		}
		roots = append(roots, root)
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("containerd reports no root of its content store nor of snapshotter %s", snapshotter)
	}
	return roots, nil
}

// statFS measures the filesystem that holds path, as df does.
func statFS(path string) (runner.FSUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return runner.FSUsage{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	unit := st.Frsize
	if unit == 0 {
		unit = st.Bsize
	}
	return runner.FSUsage{Path: path, Capacity: int64(st.Blocks) * unit, Available: int64(st.Bavail) * unit}, nil
}

// ListImages returns staticpod's images, one per config digest with every name that
// points to it. An image whose content is incomplete (a pull cut short) is listed by
// its manifest digest, with the size of what is there.
func (r *Runtime) ListImages(ctx context.Context) ([]runner.StoredImage, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	list, err := r.client.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", convertErr(err))
	}
	var out []runner.StoredImage
	byID := map[string]int{}
	for _, img := range list {
		ci := client.NewImage(r.client, img)
		id := img.Target.Digest.String()
		if conf, err := ci.Config(ctx); err == nil {
			id = conf.Digest.String()
		}
		size, err := ci.Size(ctx)
		if err != nil && !errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("size of image %s: %w", img.Name, convertErr(err))
		}
		i, ok := byID[id]
		if !ok {
			i = len(out)
			byID[id] = i
			out = append(out, runner.StoredImage{ID: id, Size: size})
		}
		s := &out[i]
		s.Names = append(s.Names, img.Name)
		if d := img.Target.Digest.String(); !slices.Contains(s.Digests, d) {
			s.Digests = append(s.Digests, d)
		}
		s.Size = max(s.Size, size)
		if img.UpdatedAt.After(s.Created) {
			s.Created = img.UpdatedAt
		}
		s.Pinned = s.Pinned || r.images.pinned(img.Name, img.Labels[labelImageArchive])
	}
	for i := range out {
		slices.Sort(out[i].Names)
		slices.Sort(out[i].Digests)
	}
	return out, nil
}

// RemoveImage deletes every name of img. The last deletion waits for containerd's
// garbage collection, so that the image's blobs and unpacked layers that nothing else
// uses are gone when it returns.
func (r *Runtime) RemoveImage(ctx context.Context, img runner.StoredImage) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	for i, name := range img.Names {
		var opts []ctrimages.DeleteOpt
		if i == len(img.Names)-1 {
			opts = append(opts, ctrimages.SynchronousDelete())
		}
		if err := r.client.ImageService().Delete(ctx, name, opts...); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove image %s: %w", name, convertErr(err))
		}
	}
	return nil
}

// ImageName is the name containerd stores a pod's image under, normalized as pulls
// normalize it ("busybox" -> "docker.io/library/busybox:latest"); "" for a string that
// names no image.
func (r *Runtime) ImageName(image string) string {
	name, err := normalizeRef(image)
	if err != nil {
		return ""
	}
	return name
}
