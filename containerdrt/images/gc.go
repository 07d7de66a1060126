package images

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
// decision (runner.ImageStore); this file only measures, lists and deletes. The caller
// gives each call its namespace and its timeout, and classes the errors for the runner.

// Plugin types whose roots hold images: content (blobs) and snapshots (unpacked layers).
const (
	contentPluginType     = "io.containerd.content.v1"
	snapshotterPluginType = "io.containerd.snapshotter.v1"
)

// Usage returns the usage of the fuller of the filesystems that hold containerd's
// content store and its snapshotter's snapshots (one and the same, usually: both are
// under containerd's --root). Their paths come from containerd's introspection service,
// which reports each plugin's root, so that this holds for any containerd, started by
// staticpod or not.
func (s *Store) Usage(ctx context.Context) (runner.FSUsage, error) {
	roots, err := s.imageRoots(ctx)
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
func (s *Store) imageRoots(ctx context.Context) ([]string, error) {
	resp, err := s.client.IntrospectionService().Plugins(ctx, "type=="+contentPluginType, "type=="+snapshotterPluginType)
	if err != nil {
		return nil, fmt.Errorf("list containerd's plugins: %w", err)
	}
	snapshotter := s.cfg.Snapshotter
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
	unit := int64(st.Frsize) // int32 on 32-bit arm
	if unit == 0 {
		unit = int64(st.Bsize)
	}
	return runner.FSUsage{Path: path, Capacity: int64(st.Blocks) * unit, Available: int64(st.Bavail) * unit}, nil
}

// List returns staticpod's images, one per config digest with every name that
// points to it. An image whose content is incomplete (a pull cut short) is listed by
// its manifest digest, with the size of what is there.
func (s *Store) List(ctx context.Context) ([]runner.StoredImage, error) {
	list, err := s.client.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	var out []runner.StoredImage
	byID := map[string]int{}
	for _, img := range list {
		ci := client.NewImage(s.client, img)
		id := img.Target.Digest.String()
		if conf, err := ci.Config(ctx); err == nil {
			id = conf.Digest.String()
		}
		size, err := ci.Size(ctx)
		if err != nil && !errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("size of image %s: %w", img.Name, err)
		}
		i, ok := byID[id]
		if !ok {
			i = len(out)
			byID[id] = i
			out = append(out, runner.StoredImage{ID: id, Size: size})
		}
		stored := &out[i]
		stored.Names = append(stored.Names, img.Name)
		if d := img.Target.Digest.String(); !slices.Contains(stored.Digests, d) {
			stored.Digests = append(stored.Digests, d)
		}
		stored.Size = max(stored.Size, size)
		if img.UpdatedAt.After(stored.Created) {
			stored.Created = img.UpdatedAt
		}
		stored.Pinned = stored.Pinned || s.pinned(img.Name, img.Labels[labelArchive])
	}
	for i := range out {
		slices.Sort(out[i].Names)
		slices.Sort(out[i].Digests)
	}
	return out, nil
}

// Remove deletes every name of img. The last deletion waits for containerd's
// garbage collection, so that the image's blobs and unpacked layers that nothing else
// uses are gone when it returns.
func (s *Store) Remove(ctx context.Context, img runner.StoredImage) error {
	for i, name := range img.Names {
		var opts []ctrimages.DeleteOpt
		if i == len(img.Names)-1 {
			opts = append(opts, ctrimages.SynchronousDelete())
		}
		if err := s.client.ImageService().Delete(ctx, name, opts...); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove image %s: %w", name, err)
		}
	}
	return nil
}
