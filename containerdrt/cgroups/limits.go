package cgroups

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/internal/systemd"
	"github.com/staticpod/staticpod/manifests"
)

// CPU conversions of the kubelet (pkg/kubelet/cm/helpers_linux.go).
const (
	minShares    = 2      // the kernel's floor for cpu.shares
	maxShares    = 262144 // the kernel's ceiling for cpu.shares
	sharesPerCPU = 1024   // cpu.shares of one whole CPU
	milliPerCPU  = 1000   // millicores in one CPU
	QuotaPeriod  = 100000 // CFS period in µs: 100ms
	minQuota     = 1000   // CFS quota floor in µs: 1ms
)

// CPUShares is the kubelet's MilliCPUToShares of the request, or of the limit when
// only a limit is set (the apiserver defaults the request to the limit; the kubelet
// repeats it). No CPU at all gets the minimum, 2, which is the kernel's value for zero.
func CPUShares(requestMilli, limitMilli int64) uint64 {
	milli := requestMilli
	if milli == 0 && limitMilli > 0 {
		milli = limitMilli
	}
	if milli == 0 {
		return minShares
	}
	shares := milli * sharesPerCPU / milliPerCPU
	return uint64(min(max(shares, minShares), maxShares))
}

// CPUQuota is the kubelet's MilliCPUToQuota: the limit's share of a 100ms period, at
// least 1ms.
func CPUQuota(limitMilli int64) int64 {
	return max(limitMilli*QuotaPeriod/milliPerCPU, minQuota)
}

// podLimits are the limits of a pod's cgroup, as the kubelet's ResourceConfigForPod
// computes them: the pod as a whole is capped at the sum of what its containers may
// use, so that the kernel reclaims and throttles it as one.
type podLimits struct {
	memory    int64  // bytes; 0 when a container has no memory limit
	cpuQuota  int64  // µs per QuotaPeriod; 0 when a container has no CPU limit
	cpuShares uint64 // from the sum of the CPU requests; minShares for BestEffort
	pids      int64  // processes; 0 for no cap (--pod-max-pids)
}

// podLimitsOf is the kubelet's ResourceConfigForPod: the pod's limits and requests
// as a whole (manifests.PodLimits, PodRequests), from spec.resources where the pod
// sets them there, else from its containers: regular containers and sidecars
// together, or what runs beside an init container where that is larger.
func podLimitsOf(pod *corev1.Pod) podLimits {
	limits := manifests.PodLimits(pod)
	memory := limits[corev1.ResourceMemory]
	l := podLimits{memory: memory.Value()}
	if cpu, ok := limits[corev1.ResourceCPU]; ok {
		l.cpuQuota = CPUQuota(cpu.MilliValue())
	}
	requests := manifests.PodRequests(pod)
	l.cpuShares = CPUShares(requests.Cpu().MilliValue(), 0)
	return l
}

// cpuWeight is cgroup v2's cpu.weight for cpu.shares, as runc and the kubelet convert:
// [2, 262144] onto [1, 10000].
func cpuWeight(shares uint64) uint64 {
	return 1 + (shares-minShares)*9999/(maxShares-minShares)
}

// EnsurePod makes pod's cgroup podCgroup (Pod) with the pod's limits before a
// container of the pod is created in it: a slice with systemd, the directories with
// cgroupfs. Calling it again sets the limits again, which the pod's spec decides alone.
func (c Pods) EnsurePod(ctx context.Context, podCgroup string, pod *corev1.Pod) error {
	l := podLimitsOf(pod)
	l.pids = c.maxPIDs
	if c.driver == Systemd {
		return ensurePodSlice(ctx, podCgroup, l)
	}
	if err := ensurePodDir(podCgroup, l, Unified()); err != nil {
		return fmt.Errorf("pod cgroup %s: %w", podCgroup, err)
	}
	return nil
}

// ensurePodSlice starts (or updates) the pod's slice with its limits; systemd writes
// them to memory.max and cpu.max (or their v1 files) and keeps them there.
func ensurePodSlice(ctx context.Context, slice string, l podLimits) error {
	props := []systemd.Property{systemd.Uint64Property("CPUWeight", cpuWeight(l.cpuShares))}
	if l.memory > 0 {
		props = append(props, systemd.Uint64Property("MemoryMax", uint64(l.memory)))
	}
	if l.cpuQuota > 0 { // systemd counts per second what the kernel counts per period
		props = append(props, systemd.Uint64Property("CPUQuotaPerSecUSec", uint64(l.cpuQuota)*(1_000_000/QuotaPeriod)))
	}
	if l.pids > 0 {
		props = append(props, systemd.Uint64Property("TasksMax", uint64(l.pids)))
	}
	bus, err := systemd.Connect(ctx)
	if err != nil {
		return fmt.Errorf("pod slice %s: %w", slice, err)
	}
	defer bus.Close()
	if err := bus.EnsureSlice(ctx, slice, props); err != nil {
		return err
	}
	return awaitSliceCgroup(ctx, slice)
}

// Bounds of the wait for a new slice's cgroup.
const (
	sliceWait = 5 * time.Second
	slicePoll = 20 * time.Millisecond
)

// awaitSliceCgroup waits until systemd has made the slice's cgroup: it starts a
// transient unit by a job that runs after the call returns, and its cgroup's OOM
// count is read right after (containerdrt's labelPodOOMKills). systemd tells a job's end only to
// those who subscribe to its signals; the directory appears within milliseconds.
func awaitSliceCgroup(ctx context.Context, slice string) error {
	dir := expandSlice(slice)
	ctx, cancel := context.WithTimeout(ctx, sliceWait)
	defer cancel()
	tick := time.NewTicker(slicePoll)
	defer tick.Stop()
	made := func() bool {
		for _, d := range []string{filepath.Join(MountPoint, dir), filepath.Join(MountPoint, "systemd", dir)} { // v2, v1
			if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
				return true
			}
		}
		return false
	}
	for {
		if made() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod slice %s: no cgroup %s after %s", slice, dir, sliceWait)
		case <-tick.C:
		}
	}
}

// podControllers are the cgroup v2 controllers a pod cgroup needs enabled in its
// parents for its limits and its containers'.
var podControllers = []string{"cpu", "memory", "pids"}

// ensurePodDir makes the pod's cgroup directory and writes its limits, on cgroup v2 in
// the unified hierarchy (enabling podControllers in each parent, as runc does for the
// directories it makes), on v1 in the memory and cpu hierarchies, where the limits
// are, and in the pids hierarchy with --pod-max-pids (runc makes the others).
func ensurePodDir(dir string, l podLimits, unified bool) error {
	if unified {
		if err := mkdirControllers(dir); err != nil {
			return err
		}
		quota := "max"
		if l.cpuQuota > 0 {
			quota = strconv.FormatInt(l.cpuQuota, 10)
		}
		return writeLimits(filepath.Join(MountPoint, dir), map[string]string{
			"memory.max": limitOrMax(l.memory, "max"),
			"cpu.max":    quota + " " + strconv.Itoa(QuotaPeriod),
			"cpu.weight": strconv.FormatUint(cpuWeight(l.cpuShares), 10),
			"pids.max":   limitOrMax(l.pids, "max"),
		})
	}
	if l.pids > 0 {
		pidsDir := filepath.Join(MountPoint, "pids", dir)
		if err := os.MkdirAll(pidsDir, 0o755); err != nil {
			return err
		}
		if err := writeLimits(pidsDir, map[string]string{"pids.max": strconv.FormatInt(l.pids, 10)}); err != nil {
			return err
		}
	}
	memDir, cpuDir := filepath.Join(MountPoint, "memory", dir), filepath.Join(MountPoint, "cpu", dir)
	for _, d := range []string{memDir, cpuDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	quota := int64(-1)
	if l.cpuQuota > 0 {
		quota = l.cpuQuota
	}
	if err := writeLimits(memDir, map[string]string{"memory.limit_in_bytes": limitOrMax(l.memory, "-1")}); err != nil {
		return err
	}
	return writeLimits(cpuDir, map[string]string{
		"cpu.cfs_period_us": strconv.Itoa(QuotaPeriod),
		"cpu.cfs_quota_us":  strconv.FormatInt(quota, 10),
		"cpu.shares":        strconv.FormatUint(l.cpuShares, 10),
	})
}

func limitOrMax(n int64, unlimited string) string {
	if n <= 0 {
		return unlimited
	}
	return strconv.FormatInt(n, 10)
}

// mkdirControllers makes dir and its parents in the unified hierarchy, enabling
// podControllers for each new level's children.
func mkdirControllers(dir string) error {
	cur := MountPoint
	for _, part := range strings.Split(strings.Trim(path.Clean(dir), "/"), "/") {
		if err := enableControllers(cur); err != nil {
			return err
		}
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// enableControllers enables podControllers in dir's cgroup.subtree_control, those of
// them dir has (cgroup.controllers).
func enableControllers(dir string) error {
	have, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	var enable []string
	for _, c := range podControllers {
		if strings.Contains(" "+strings.TrimSpace(string(have))+" ", " "+c+" ") {
			enable = append(enable, "+"+c)
		}
	}
	if len(enable) == 0 {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0)
}

// writeLimits writes each file of a cgroup directory.
func writeLimits(dir string, files map[string]string) error {
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// RemovePod removes the cgroup of the pod with the UID uid, whose containers are
// gone: runc removes a container's cgroup, never its parents. With systemd the pod's
// slice is stopped (an empty slice stays otherwise); with cgroupfs its directory is
// removed from every hierarchy. The pod's QoS class may have changed with its spec, so
// each is tried. A pod cgroup that still holds a process is left alone: stopping a
// slice would kill what runs in it, and rmdir fails (EBUSY) on it anyway.
func (c Pods) RemovePod(ctx context.Context, uid types.UID) error {
	if err := manifests.CheckUID(uid); err != nil {
		return fmt.Errorf("remove the cgroup of a pod: %w", err)
	}
	if c.driver == Systemd {
		bus, err := systemd.Connect(ctx)
		if err != nil {
			return fmt.Errorf("remove the cgroup of pod %s: %w", uid, err)
		}
		defer bus.Close()
		var errs []error
		for _, q := range qosClasses {
			slice := c.podIn(q, uid)
			if populated(filepath.Join(MountPoint, expandSlice(slice))) {
				continue
			}
			errs = append(errs, bus.StopUnit(ctx, slice))
		}
		return errors.Join(errs...)
	}
	hierarchies := []string{MountPoint}
	if !Unified() {
		hierarchies, _ = filepath.Glob(filepath.Join(MountPoint, "*"))
	}
	var errs []error
	for _, q := range qosClasses {
		for _, h := range hierarchies {
			err := syscall.Rmdir(filepath.Join(h, c.podIn(q, uid)))
			if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.EBUSY) {
				errs = append(errs, fmt.Errorf("remove the cgroup of pod %s: %w", uid, err))
			}
		}
	}
	return errors.Join(errs...)
}
