package stats

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// DefaultDiskPeriod is how often a pod's disk use is measured again: the kubelet's
// volume stats aggregation period. A pod is measured first at the sample after it
// appears or a container of it changes.
const DefaultDiskPeriod = time.Minute

// Disks is where the runtime keeps a pod's files and what its containers' writable
// layers hold; containerdrt's Runtime implements it.
type Disks interface {
	// VolumeDir is the host directory of the pod's volume (an emptyDir, configMap,
	// secret, downwardAPI or projected volume), EtcHosts the pod's /etc/hosts file.
	VolumeDir(uid types.UID, volume string) (string, error)
	EtcHosts(uid types.UID) (string, error)
	// Layers is what the writable layers of the containers with these IDs hold (the
	// snapshotter's usage of each one's snapshot); a container without one is left out.
	Layers(ctx context.Context, ids []string) (map[string]DiskUsage, error)
	// ImageFs is the root of the snapshotter and what all the snapshots of staticpod's
	// namespace hold together (images unpacked and writable layers).
	ImageFs(ctx context.Context) (root string, used DiskUsage, err error)
}

// disks is the last measure of the node's filesystems and of each pod's disk use.
type disks struct {
	at    time.Time // of the node's filesystems
	node  *statsapi.FsStats
	image *statsapi.FsStats
	pods  map[types.UID]*podDisk
}

// podDisk is one pod's disk use, measured at one time.
type podDisk struct {
	at         time.Time
	ids        map[string]string // the running containers measured: name to ID
	volumes    []statsapi.VolumeStats
	ephemeral  []string // the names of its local ephemeral volumes, counted in its ephemeral storage
	containers map[string]containerDisk
	podLogs    DiskUsage // files right in the pod's log directory
	etcHosts   DiskUsage
}

type containerDisk struct {
	rootfs *statsapi.FsStats // nil when the runtime could not tell
	logs   *statsapi.FsStats
}

// SampleDisks measures the disk use of the pods not measured for DiskPeriod, new ones
// and those whose running containers changed, and, every DiskPeriod, the node's and
// the images' filesystems. With no such pod it reads nothing; with no pod at all it
// forgets every measure.
func (s *Sampler) SampleDisks(ctx context.Context) {
	pods := s.cfg.Pods()
	now := s.cfg.Now()
	s.mu.Lock()
	old := s.disks
	s.mu.Unlock()
	next := disks{at: old.at, node: old.node, image: old.image, pods: map[types.UID]*podDisk{}}
	if len(pods) == 0 {
		s.storeDisks(disks{})
		return
	}
	var due []*corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || next.pods[p.UID] != nil {
			continue
		}
		if d := old.pods[p.UID]; d != nil && now.Sub(d.at) < s.cfg.DiskPeriod && sameIDs(d.ids, runningIDs(p)) {
			next.pods[p.UID] = d
			continue
		}
		next.pods[p.UID] = &podDisk{} // reserved: measured below
		due = append(due, p)
	}
	fsDue := old.at.IsZero() || now.Sub(old.at) >= s.cfg.DiskPeriod
	if len(due) == 0 && !fsDue {
		s.storeDisks(next)
		return
	}
	var imageRoot string
	if fsDue {
		next.at = now
		next.node, next.image, imageRoot = s.nodeFs(ctx, now)
	} else if next.image != nil {
		imageRoot = s.imageRoot
	}
	imageFs := fsInfoOf(imageRoot)
	logFs := fsInfoOf(s.logRoot())
	for _, p := range due {
		next.pods[p.UID] = s.podDisk(ctx, p, now, imageFs, logFs)
	}
	s.storeDisks(next)
}

func (s *Sampler) storeDisks(d disks) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disks = d
	s.diskSamples++
}

// nodeFs measures the filesystem of staticpod's root directory (the kubelet's
// nodefs) and the snapshotter's (its imagefs).
func (s *Sampler) nodeFs(ctx context.Context, now time.Time) (node, image *statsapi.FsStats, imageRoot string) {
	if s.cfg.RootDir != "" {
		if info, err := StatFs(s.cfg.RootDir); err == nil {
			node = fsStats(now, &info, nil)
			used, inodesUsed := info.Used, info.Inodes-info.InodesFree
			node.UsedBytes, node.InodesUsed = &used, &inodesUsed
		} else {
			s.cfg.Log.Debug("measure the node's filesystem", "err", err)
		}
	}
	if s.cfg.Disks == nil {
		return node, nil, ""
	}
	root, used, err := s.cfg.Disks.ImageFs(ctx)
	if err != nil {
		s.cfg.Log.Debug("measure the images' filesystem", "err", err)
		return node, nil, ""
	}
	s.imageRoot = root
	return node, fsStats(now, fsInfoOf(root), &used), root
}

// podDisk measures the pod's volumes, its log directory, its /etc/hosts and its
// running containers' writable layers, as the kubelet's volume stats and its CRI
// stats provider do. A hostPath or an image volume is never walked: the kubelet
// reports neither.
func (s *Sampler) podDisk(ctx context.Context, p *corev1.Pod, now time.Time, imageFs, logFs *FsInfo) *podDisk {
	d := &podDisk{at: now, ids: runningIDs(p), containers: map[string]containerDisk{}}
	if s.cfg.Disks != nil {
		for _, v := range p.Spec.Volumes {
			if !measured(v) {
				continue
			}
			dir, err := s.cfg.Disks.VolumeDir(p.UID, v.Name)
			if err != nil {
				continue
			}
			du, err := Du(dir)
			if err != nil {
				continue // not made yet, or gone
			}
			d.volumes = append(d.volumes, statsapi.VolumeStats{Name: v.Name, FsStats: *fsStats(now, fsInfoOf(dir), &du)})
			if localEphemeral(v) {
				d.ephemeral = append(d.ephemeral, v.Name)
			}
		}
		if path, err := s.cfg.Disks.EtcHosts(p.UID); err == nil {
			d.etcHosts, _ = Du(path)
		}
	}
	var layers map[string]DiskUsage
	if s.cfg.Disks != nil && len(d.ids) > 0 {
		ids := make([]string, 0, len(d.ids))
		for _, id := range d.ids {
			ids = append(ids, id)
		}
		var err error
		if layers, err = s.cfg.Disks.Layers(ctx, ids); err != nil {
			s.cfg.Log.Debug("measure writable layers", "pod", p.Name, "err", err)
		}
	}
	logDir := podLogDir(s.cfg.PodLogDir, p)
	for name, id := range d.ids {
		var cd containerDisk
		if l, ok := layers[id]; ok {
			cd.rootfs = fsStats(now, imageFs, &l)
		}
		if du, err := Du(filepath.Join(logDir, name)); err == nil {
			cd.logs = fsStats(now, logFs, &du)
		}
		d.containers[name] = cd
	}
	// Files right in the pod's log directory count too, the containers' directories
	// being counted with each container.
	if entries, err := os.ReadDir(logDir); err == nil {
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			if du, err := Du(filepath.Join(logDir, e.Name())); err == nil {
				d.podLogs.Bytes += du.Bytes
				d.podLogs.Inodes += du.Inodes
			}
		}
	}
	return d
}

// measured tells whether the kubelet reports the volume's usage: those it makes in
// the pod's directory. A hostPath reports nothing (its metrics are nil), nor does an
// image volume.
func measured(v corev1.Volume) bool {
	return v.EmptyDir != nil || v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
}

// localEphemeral is the kubelet's IsLocalEphemeralVolume: a volume on the node's disk
// that lives as long as the pod, counted in the pod's ephemeral storage.
func localEphemeral(v corev1.Volume) bool {
	return v.GitRepo != nil || v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumDefault || v.ConfigMap != nil
}

// runningIDs is the pod's running containers, name to container ID.
func runningIDs(p *corev1.Pod) map[string]string {
	ids := map[string]string{}
	for _, cs := range p.Status.ContainerStatuses {
		if _, id, ok := strings.Cut(cs.ContainerID, "://"); ok && cs.State.Running != nil {
			ids[cs.Name] = id
		}
	}
	return ids
}

func sameIDs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func (s *Sampler) logRoot() string {
	if s.cfg.PodLogDir == "" {
		return defaultLogRoot
	}
	return s.cfg.PodLogDir
}

// fsInfoOf is statfs of path, nil when path is empty or cannot be measured.
func fsInfoOf(path string) *FsInfo {
	if path == "" {
		return nil
	}
	info, err := StatFs(path)
	if err != nil {
		return nil
	}
	return &info
}

// fsStats is the kubelet's FsStats of what du found on the filesystem info describes:
// the filesystem's figures are left out when unknown.
func fsStats(at time.Time, info *FsInfo, du *DiskUsage) *statsapi.FsStats {
	f := &statsapi.FsStats{Time: metav1.NewTime(at)}
	if info != nil {
		available, capacity, inodes, free := info.Available, info.Capacity, info.Inodes, info.InodesFree
		f.AvailableBytes, f.CapacityBytes, f.Inodes, f.InodesFree = &available, &capacity, &inodes, &free
	}
	if du != nil {
		used, inodesUsed := du.Bytes, du.Inodes
		f.UsedBytes, f.InodesUsed = &used, &inodesUsed
	}
	return f
}
