package stats

import (
	"io/fs"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpod/staticpod/logs"
)

// Summary is the last sample in the kubelet's /stats/summary shape: the node, and each
// pod with its running containers, CPU (cumulative and the rate since the sample
// before), memory and, on cgroup v2, pressure; a pod's ephemeral storage is its log
// directory. Pods whose cgroup could not be read are left out, as the kubelet leaves
// out pods cAdvisor does not know yet.
func (s *Sampler) Summary() *statsapi.Summary {
	s.mu.Lock()
	smp := s.last
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
		for _, c := range pr.containers {
			ps.Containers = append(ps.Containers, statsapi.ContainerStats{
				Name: c.name, StartTime: metav1.NewTime(c.started),
				CPU: cpuStats(c.reading), Memory: memoryStats(c.reading),
			})
		}
		if pr.logErr == nil {
			used, inodes := pr.logBytes, pr.logInodes
			ps.EphemeralStorage = &statsapi.FsStats{Time: metav1.NewTime(smp.at), UsedBytes: &used, InodesUsed: &inodes}
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

// podLogDir is the pod's log directory under root (logs.DefaultPodsDir when empty).
func podLogDir(root string, p *corev1.Pod) string {
	if root == "" {
		root = logs.DefaultPodsDir
	}
	return logs.PodDir(root, p.Namespace, p.Name, string(p.UID))
}

// dirUsage is the bytes and inodes of the files below dir, as the kubelet's du of a
// pod's log directory counts them.
func dirUsage(dir string) (bytes, inodes uint64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		inodes++
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				bytes += uint64(info.Size())
			}
		}
		return nil
	})
	return bytes, inodes, err
}
