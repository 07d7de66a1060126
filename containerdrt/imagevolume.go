package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/image-spec/identity"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/containerdrt/poddir"
	"github.com/staticpod/staticpod/runner"
)

// The image of an image volume is mounted as containerd's CRI mounts one
// (internal/cri/server/container_image_mount.go): the image, unpacked for the
// snapshotter, is given a snapshot of the pod's own on top of its layers, whose mounts
// are mounted once per pod and image in the pod's directory
// (poddir.ImageVolumeDir), and containers bind that read-only. Where the CRI takes a
// writable snapshot and leans on its bind being read-only, this one is a View, which
// no one can write through.
//
// The snapshot's key names the pod, <imageVolumeKeyPrefix><uid>/<chain ID>, so that
// what a pod left is found by its key: RemovePodData removes the pod's views after
// unmounting its directory, and the first repair removes those of pods that have no
// container any more (sweepImageVolumes), which a staticpod killed between the two
// leaves. A view carries containerd's gc.root label: no lease holds it, and it must
// outlive any lease, until it is removed.
const (
	imageVolumeKeyPrefix = "staticpod-image-volume/"
	labelGCRoot          = "containerd.io/gc.root"
)

// imageVolumeKey is the key of the view of the image whose layers make chainID, for
// the pod uid.
func imageVolumeKey(uid types.UID, chainID string) string {
	return imageVolumeKeyPrefix + string(uid) + "/" + chainID
}

// imageVolumeUID is the pod UID a view's key names, if key is one of an image volume.
func imageVolumeUID(key string) (types.UID, bool) {
	rest, ok := strings.CutPrefix(key, imageVolumeKeyPrefix)
	if !ok {
		return "", false
	}
	uid, _, ok := strings.Cut(rest, "/")
	return types.UID(uid), ok && uid != ""
}

// mountImageVolumes mounts the image of each image volume the container of req mounts
// (req.ImageVolumes, made present by the runner) in the pod's directory, and returns
// where, by volume name.
func (r *Runtime) mountImageVolumes(ctx context.Context, req runner.CreateRequest, podDir string) (map[string]string, error) {
	var dirs map[string]string
	for _, vm := range req.Container.VolumeMounts {
		if _, done := dirs[vm.Name]; done || !isImageVolume(req.Pod, vm.Name) {
			continue
		}
		img, ok := req.ImageVolumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("image volume %s: its image was not made present", vm.Name)
		}
		dir, err := r.mountImage(ctx, req.Pod.UID, podDir, img.Ref)
		if err != nil {
			return nil, fmt.Errorf("image volume %s: %w", vm.Name, err)
		}
		if dirs == nil {
			dirs = map[string]string{}
		}
		dirs[vm.Name] = dir
	}
	return dirs, nil
}

// isImageVolume reports whether the pod's volume called name is an image volume.
func isImageVolume(pod *corev1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name {
			return v.Image != nil
		}
	}
	return false
}

// mountImage mounts a view of the image named ref, unpacked for the snapshotter, in
// the pod's directory, unless it is mounted there already, and returns where. A view
// left by an earlier attempt (its mount failed, or staticpod stopped before it) is
// mounted as it is.
func (r *Runtime) mountImage(ctx context.Context, uid types.UID, podDir, ref string) (string, error) {
	img, err := r.client.GetImage(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, convertErr(err))
	}
	diffIDs, err := img.RootFS(ctx)
	if err != nil {
		return "", fmt.Errorf("layers of image %s: %w", ref, convertErr(err))
	}
	chainID := identity.ChainID(diffIDs)
	dir, err := poddir.ImageVolumeDir(podDir, chainID.Encoded())
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	mounted, err := mountinfo.Mounted(dir)
	if err != nil {
		return "", fmt.Errorf("check mount at %s: %w", dir, err)
	}
	if mounted {
		return dir, nil // by an earlier container of the pod
	}
	sn := r.client.SnapshotService(r.cfg.Images.Snapshotter)
	key := imageVolumeKey(uid, chainID.Encoded())
	mounts, err := sn.View(ctx, key, chainID.String(), snapshots.WithLabels(map[string]string{
		labelGCRoot: time.Now().UTC().Format(time.RFC3339),
	}))
	if errdefs.IsAlreadyExists(err) {
		mounts, err = sn.Mounts(ctx, key)
	}
	if err != nil {
		return "", fmt.Errorf("view of image %s: %w", ref, convertErr(err))
	}
	if err := mount.All(mounts, dir); err != nil {
		return "", fmt.Errorf("mount image %s at %s: %w", ref, dir, err)
	}
	return dir, nil
}

// removeImageVolumes removes the views of the images of image volumes of every pod
// that keep does not keep. Their mounts must be gone (poddir.Remove unmounts them). A
// view that is already gone is no error.
func (r *Runtime) removeImageVolumes(ctx context.Context, keep func(types.UID) bool) error {
	sn := r.client.SnapshotService(r.cfg.Images.Snapshotter)
	var keys []string
	err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if uid, ok := imageVolumeUID(info.Name); ok && !keep(uid) {
			keys = append(keys, info.Name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list image volume views: %w", convertErr(err))
	}
	var errs []error
	for _, key := range keys {
		if err := sn.Remove(ctx, key); ignoreNotFound(convertErr(err)) != nil {
			errs = append(errs, fmt.Errorf("remove image volume view %s: %w", key, convertErr(err)))
		}
	}
	return errors.Join(errs...)
}
