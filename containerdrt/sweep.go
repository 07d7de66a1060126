package containerdrt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/leases"
	"k8s.io/apimachinery/pkg/types"
)

// sweepCreations ends what a staticpod killed in the middle of creating a container
// leaves without a container record: the lease the client took for the creation, which
// keeps the container's snapshot for 24 h. A lease created before since, all of whose
// resources are snapshots that no container record names, is deleted with them. A live
// staticpod never leaves such a lease (a creation that fails ends its lease), so it
// runs once, at the first repair: before any pod's worker creates a container, as
// workers wait for the first relist and its repair. Failures are logged; a lease left
// costs a snapshot until it expires.
func (rp *repairer) sweepCreations(ctx context.Context, infos []containers.Container, since time.Time) {
	ls := rp.rt.client.LeasesService()
	all, err := ls.List(ctx)
	if err != nil {
		rp.rt.log.Warn("list leases of interrupted creations", "err", convertErr(err))
		return
	}
	records := make(map[string]bool, len(infos))
	for _, info := range infos {
		records[info.ID] = true
	}
	for _, l := range all {
		if !l.CreatedAt.Before(since) {
			continue
		}
		res, err := ls.ListResources(ctx, l)
		if err != nil || !orphanedSnapshots(res, records) {
			continue
		}
		if err := ls.Delete(ctx, l, leases.SynchronousDelete); ignoreNotFound(convertErr(err)) != nil {
			rp.rt.log.Warn("delete the lease of an interrupted creation", "lease", l.ID, "err", convertErr(err))
			continue
		}
		rp.rt.log.Info("removed the snapshot of an interrupted creation", "lease", l.ID, "snapshot", res[0].ID)
	}
}

// orphanedSnapshots reports whether res are snapshots, at least one, that no container
// record names.
func orphanedSnapshots(res []leases.Resource, records map[string]bool) bool {
	for _, x := range res {
		if !strings.HasPrefix(x.Type, "snapshots/") || records[x.ID] {
			return false
		}
	}
	return len(res) > 0
}

// sweepImageVolumes removes the views of the images of image volumes of pods that no
// container record names, once their directories are gone (sweepPodData): what a
// staticpod killed between removing a pod's last container and removing its data
// leaves. It runs once, at the first repair, after sweepPodData.
func (rp *repairer) sweepImageVolumes(ctx context.Context, infos []containers.Container) {
	uids := make(map[types.UID]bool, len(infos))
	for _, info := range infos {
		uids[types.UID(info.Labels[LabelPodUID])] = true
	}
	if err := rp.rt.removeImageVolumes(ctx, func(uid types.UID) bool { return uids[uid] }); err != nil {
		rp.rt.log.Warn("remove the image volumes of pods that are gone", "err", err)
	}
}

// sweepPodData removes the pod directories (unmounting their tmpfs volumes and /dev/shm)
// and log directories of pods that no container record names: what a staticpod killed
// between removing a pod's last container and removing its data leaves, which nothing
// else would ever find. Like sweepCreations it runs once, at the first repair, before any
// worker prepares a pod; a pod that is still wanted gets its directories anew.
func (rp *repairer) sweepPodData(infos []containers.Container) {
	// Both places of pod directories (see Config.RunDir), each pod once.
	seen := map[string]bool{}
	var entries []os.DirEntry
	for _, dir := range []string{filepath.Join(rp.rt.cfg.RootDir, podsDir), filepath.Join(rp.rt.cfg.RunDir, podsDir)} {
		in, _ := os.ReadDir(dir)
		for _, e := range in {
			if !seen[e.Name()] {
				seen[e.Name()] = true
				entries = append(entries, e)
			}
		}
	}
	uids := make(map[string]bool, len(infos))
	for _, info := range infos {
		uids[info.Labels[LabelPodUID]] = true
	}
	for _, e := range entries {
		if uids[e.Name()] {
			continue
		}
		if err := rp.rt.removePodDirs(types.UID(e.Name())); err != nil {
			rp.rt.log.Warn("remove the data of a pod that is gone", "uid", e.Name(), "err", err)
			continue
		}
		if err := rp.rt.users.Release(e.Name()); err != nil { // its user namespace's block, if it had one
			rp.rt.log.Warn("release the user namespace of a pod that is gone", "uid", e.Name(), "err", err)
		}
		rp.rt.log.Info("removed the data of a pod that is gone", "uid", e.Name())
	}
	if rp.rt.cfg.PodLogDir == "" {
		return
	}
	logs, _ := os.ReadDir(rp.rt.cfg.PodLogDir)
	for _, e := range logs {
		uid := e.Name()[strings.LastIndexByte(e.Name(), '_')+1:]
		if !e.IsDir() || uids[uid] || !strings.Contains(e.Name(), "_") {
			continue
		}
		if err := os.RemoveAll(filepath.Join(rp.rt.cfg.PodLogDir, e.Name())); err != nil {
			rp.rt.log.Warn("remove the logs of a pod that is gone", "uid", uid, "err", err)
		}
	}
}
