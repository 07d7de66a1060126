package images

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/errdefs"
)

// SnapshotterRoot is the root directory of the snapshotter staticpod unpacks images
// for, as containerd's introspection reports it: the filesystem of images and
// writable layers (the kubelet's imagefs).
func (s *Store) SnapshotterRoot(ctx context.Context) (string, error) {
	snapshotter := s.snapshotter()
	resp, err := s.client.IntrospectionService().Plugins(ctx, "type=="+snapshotterPluginType+",id=="+snapshotter)
	if err != nil {
		return "", fmt.Errorf("list containerd's plugins: %w", err)
	}
	for _, p := range resp.Plugins {
		if root := p.Exports["root"]; root != "" {
			return root, nil
		}
	}
	return "", fmt.Errorf("containerd reports no root of snapshotter %s", snapshotter)
}

// SnapshotUsage is what each snapshot named in keys holds, from the snapshotter (for
// an active snapshot, a container's writable layer, it walks its upper directory); a
// missing snapshot is left out.
func (s *Store) SnapshotUsage(ctx context.Context, keys []string) (map[string]snapshots.Usage, error) {
	sn := s.client.SnapshotService(s.snapshotter())
	out := map[string]snapshots.Usage{}
	for _, key := range keys {
		u, err := sn.Usage(ctx, key)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("usage of snapshot %s: %w", key, err)
		}
		out[key] = u
	}
	return out, nil
}

// SnapshotsUsage is what all the snapshots of the namespace hold together: the images
// unpacked (their committed snapshots' usage, which the snapshotter keeps) and the
// writable layers (walked), as containerd's CRI reports its image filesystem's usage.
func (s *Store) SnapshotsUsage(ctx context.Context) (snapshots.Usage, error) {
	sn := s.client.SnapshotService(s.snapshotter())
	var keys []string
	if err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		keys = append(keys, info.Name)
		return nil
	}); err != nil {
		return snapshots.Usage{}, fmt.Errorf("list snapshots: %w", err)
	}
	each, err := s.SnapshotUsage(ctx, keys)
	var total snapshots.Usage
	for _, u := range each {
		total.Add(u)
	}
	return total, err
}

func (s *Store) snapshotter() string {
	if s.cfg.Snapshotter == "" {
		return defaults.DefaultSnapshotter
	}
	return s.cfg.Snapshotter
}
