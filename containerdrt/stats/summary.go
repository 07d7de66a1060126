package stats

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpod/staticpod/logs"
)

// Summary is the latest sample, taken first when it is older than the period, in the
// kubelet's /stats/summary shape: the node, and each pod with its running containers,
// CPU (cumulative and the rate since the sample before), memory and, on cgroup v2, pressure; with the last measure of the disks
// (SampleDisks): the node's and the images' filesystems, each pod's volumes and
// ephemeral storage, each container's writable layer (rootfs) and logs. Pods whose
// cgroup could not be read are left out, as the kubelet leaves out pods cAdvisor does
// not know yet.
func (s *Sampler) Summary() *statsapi.Summary {
	s.fresh()
	s.mu.Lock()
	smp, dk := s.last, s.disks
	s.mu.Unlock()
	sum := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: s.cfg.Node}, Pods: []statsapi.PodStats{}}
	if smp.at.IsZero() {
		return sum
	}
	if !s.booted.IsZero() {
		sum.Node.StartTime = metav1.NewTime(s.booted)
	}
	if smp.node.err == nil {
		sum.Node.CPU, sum.Node.Memory = cpuStats(smp.node), memoryStats(smp.node)
	}
	sum.Node.Fs = dk.node
	if dk.image != nil {
		sum.Node.Runtime = &statsapi.RuntimeStats{ImageFs: dk.image}
	}
	for _, pr := range smp.pods {
		ps := statsapi.PodStats{
			PodRef:     statsapi.PodReference{Name: pr.pod.Name, Namespace: pr.pod.Namespace, UID: string(pr.ref)},
			Containers: []statsapi.ContainerStats{},
			CPU:        cpuStats(pr.reading),
			Memory:     memoryStats(pr.reading),
		}
		if st := pr.pod.Status.StartTime; st != nil {
			ps.StartTime = *st
		}
		d := dk.pods[pr.ref]
		if d != nil && d.at.IsZero() {
			d = nil // being measured for the first time
		}
		for _, c := range pr.containers {
			cs := statsapi.ContainerStats{
				Name: c.name, StartTime: metav1.NewTime(c.started),
				CPU: cpuStats(c.reading), Memory: memoryStats(c.reading),
			}
			if d != nil && d.ids[c.name] == c.id {
				cs.Rootfs, cs.Logs = d.containers[c.name].rootfs, d.containers[c.name].logs
			}
			ps.Containers = append(ps.Containers, cs)
		}
		if d != nil {
			ps.VolumeStats = d.volumes
			ps.EphemeralStorage = ephemeralStorage(d, dk.node)
		}
		sum.Pods = append(sum.Pods, ps)
	}
	return sum
}

func cpuStats(r reading) *statsapi.CPUStats {
	total := r.usage.CPUNanos
	c := &statsapi.CPUStats{Time: metav1.NewTime(r.at), UsageCoreNanoSeconds: &total, UsageNanoCores: r.nanoCores}
	if p := r.usage.PSI; p != nil {
		c.PSI = psiStats(p.CPU)
	}
	return c
}

func memoryStats(r reading) *statsapi.MemoryStats {
	u := r.usage
	m := &statsapi.MemoryStats{
		Time: metav1.NewTime(r.at), UsageBytes: &u.MemoryUsage, WorkingSetBytes: &u.WorkingSet,
		RSSBytes: &u.RSS, PageFaults: &u.PageFaults, MajorPageFaults: &u.MajorPageFaults,
	}
	if p := u.PSI; p != nil {
		m.PSI = psiStats(p.Memory)
	}
	return m
}

func psiStats(p PSI) *statsapi.PSIStats {
	return &statsapi.PSIStats{
		Some: statsapi.PSIData{Total: p.Some.Total, Avg10: p.Some.Avg10, Avg60: p.Some.Avg60, Avg300: p.Some.Avg300},
		Full: statsapi.PSIData{Total: p.Full.Total, Avg10: p.Full.Avg10, Avg60: p.Full.Avg60, Avg300: p.Full.Avg300},
	}
}

// defaultLogRoot is where the pods' log directories are unless configured.
const defaultLogRoot = logs.DefaultPodsDir

// podLogDir is the pod's log directory under root (logs.DefaultPodsDir when empty).
func podLogDir(root string, p *corev1.Pod) string {
	if root == "" {
		root = defaultLogRoot
	}
	return logs.PodDir(root, p.Namespace, p.Name, string(p.UID))
}

// ephemeralStorage is the kubelet's calcEphemeralStorage: on the node's filesystem,
// what the pod's running containers' writable layers and logs, its local ephemeral
// volumes (emptyDirs on disk, configMaps), the files right in its log directory and
// its /etc/hosts hold together. The kubelet counts a container's logs only along with
// its writable layer; here they count whether or not the runtime could tell the layer.
func ephemeralStorage(d *podDisk, node *statsapi.FsStats) *statsapi.FsStats {
	var used, inodes uint64
	add := func(f *statsapi.FsStats) {
		if f != nil && f.UsedBytes != nil && f.InodesUsed != nil {
			used, inodes = used+*f.UsedBytes, inodes+*f.InodesUsed
		}
	}
	for _, c := range d.containers {
		add(c.rootfs)
		add(c.logs)
	}
	for _, v := range d.volumes {
		if slices.Contains(d.ephemeral, v.Name) {
			add(&v.FsStats)
		}
	}
	used += d.podLogs.Bytes + d.etcHosts.Bytes
	inodes += d.podLogs.Inodes + d.etcHosts.Inodes
	e := &statsapi.FsStats{Time: metav1.NewTime(d.at), UsedBytes: &used, InodesUsed: &inodes}
	if node != nil {
		e.AvailableBytes, e.CapacityBytes, e.Inodes, e.InodesFree = node.AvailableBytes, node.CapacityBytes, node.Inodes, node.InodesFree
	}
	return e
}
