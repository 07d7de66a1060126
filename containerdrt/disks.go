package containerdrt

import (
	"context"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/containerdrt/poddir"
	"github.com/staticpod/staticpod/containerdrt/stats"
)

// The Runtime tells the stats sampler where a pod's files are and what its containers'
// writable layers hold.
var _ stats.Disks = (*Runtime)(nil)

// VolumeDir is the host directory of the pod's volume named volume (emptyDir,
// configMap, secret, downwardAPI and projected volumes are made there).
func (r *Runtime) VolumeDir(uid types.UID, volume string) (string, error) {
	dir, err := r.podDir(uid)
	if err != nil {
		return "", err
	}
	return poddir.VolumeDir(dir, volume), nil
}

// EtcHosts is the pod's /etc/hosts file on the host.
func (r *Runtime) EtcHosts(uid types.UID) (string, error) {
	dir, err := r.podDir(uid)
	if err != nil {
		return "", err
	}
	return filepath.Join(r.runDirOf(dir), poddir.EtcHostsFile), nil
}

// Layers is what the writable layers of the containers with these IDs hold: each is
// the snapshot named for its container.
func (r *Runtime) Layers(ctx context.Context, ids []string) (map[string]stats.DiskUsage, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	each, err := r.images.SnapshotUsage(ctx, ids)
	out := make(map[string]stats.DiskUsage, len(each))
	for id, u := range each {
		out[id] = stats.DiskUsage{Bytes: uint64(max(u.Size, 0)), Inodes: uint64(max(u.Inodes, 0))}
	}
	return out, err
}

// ImageFs is the snapshotter's root and what all the snapshots of staticpod's
// namespace hold.
func (r *Runtime) ImageFs(ctx context.Context) (string, stats.DiskUsage, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	root, err := r.images.SnapshotterRoot(ctx)
	if err != nil {
		return "", stats.DiskUsage{}, err
	}
	u, err := r.images.SnapshotsUsage(ctx)
	if err != nil {
		return "", stats.DiskUsage{}, err
	}
	return root, stats.DiskUsage{Bytes: uint64(max(u.Size, 0)), Inodes: uint64(max(u.Inodes, 0))}, nil
}
