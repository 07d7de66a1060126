package containerdrt

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/poddir"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// PreparePod makes the pod's cgroup with its limits and its directory: its /etc files,
// emptyDirs and the volumes staticpod writes, and returns what it resolved of the pod
// for its sandbox and containers (podConfig; see runner.Runtime).
func (r *Runtime) PreparePod(ctx context.Context, pod *corev1.Pod, objs manifests.Objects) (runner.PodConfig, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	cfg, err := r.podConfig(pod, objs) // the user namespace allocated first: the pod's files are owned in it
	if err != nil {
		return runner.PodConfig{}, fmt.Errorf("prepare pod %s: %w", manifests.Key(pod), err)
	}
	if err := r.cgroup.EnsurePod(ctx, cfg.Cgroup, pod); err != nil {
		return runner.PodConfig{}, fmt.Errorf("prepare pod %s: %w", manifests.Key(pod), err)
	}
	if err := poddir.PreparePod(pod, cfg.Dir, cfg.RunDir, r.cfg.HostIP, objs); err != nil {
		return runner.PodConfig{}, fmt.Errorf("prepare pod %s: %w", manifests.Key(pod), err)
	}
	return cfg, nil
}

// SyncVolumes brings the pod's configMap, secret and projected volumes up to date with
// objs (see runner.Runtime). A volume not made yet is left for PreparePod; so is
// a tmpfs volume whose tmpfs is gone (the machine restarted): the next container of
// the pod makes it again, and a running container still sees what it had.
func (r *Runtime) SyncVolumes(ctx context.Context, pod *corev1.Pod, objs manifests.Objects) error {
	podDir, err := r.podDir(pod.UID)
	if err != nil {
		return fmt.Errorf("sync volumes: %w", err)
	}
	changed, err := poddir.SyncVolumes(pod, podDir, r.cfg.HostIP, objs)
	for _, vol := range changed {
		r.log.Info("volume updated", "pod", manifests.Key(pod), "uid", pod.UID, "volume", vol)
	}
	return err
}
