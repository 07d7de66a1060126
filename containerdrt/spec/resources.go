package spec

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/manifests"
)

// Where the host's resources are read.
const (
	meminfoPath = "/proc/meminfo"
	cgroupRoot  = cgroups.MountPoint
	memswV1     = cgroupRoot + "/memory/memory.memsw.limit_in_bytes"
)

// Resources turns the container's requests and limits into cgroup settings as the
// kubelet does (kuberuntime calculateLinuxResources): cpu.shares from the CPU request
// (from the limit when only a limit is set), a CFS quota from the CPU limit, and the
// memory limit, with swap held to that limit where the kernel accounts swap; and the
// OOM score of the container's QoS class, never below staticpod's own (oomScoreOpts).
// A container without a CPU or memory limit of its own in a pod with pod-level limits
// gets the pod's (manifests.ContainerLimits), as runtimes that size themselves from
// their cgroup expect.
func Resources(in Input) ([]oci.SpecOpts, error) {
	opts, err := oomScoreOpts(in, MemTotal, OwnOOMScoreAdj)
	if err != nil {
		return nil, err
	}
	limits := manifests.ContainerLimits(in.Pod, in.Container)
	cpuRequest, cpuLimit := in.Container.Resources.Requests.Cpu().MilliValue(), limits.Cpu().MilliValue()
	opts = append(opts, oci.WithCPUShares(cgroups.CPUShares(cpuRequest, cpuLimit)))
	if cpuLimit > 0 {
		opts = append(opts, oci.WithCPUCFS(cgroups.CPUQuota(cpuLimit), cgroups.QuotaPeriod))
	}
	if limit := limits.Memory().Value(); limit > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(limit)))
		if SwapAccounted() {
			// memory+swap equal to memory: no swap beyond the limit (the kubelet's
			// NoSwap). runc writes memory.swap.max = 0 for it on cgroup v2.
			opts = append(opts, oci.WithMemorySwap(limit))
		}
	}
	return opts, nil
}

// SwapAccounted reports whether the kernel accounts swap per cgroup, as containerd's
// CRI checks before setting swap: memory.memsw.* on cgroup v1, memory.swap.max in our
// own cgroup on v2. When unsure it says no and swap is left unset.
var SwapAccounted = sync.OnceValue(func() bool {
	if !HostCgroups().Unified {
		_, err := os.Stat(memswV1)
		return err == nil
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		if path, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			_, err := os.Stat(filepath.Join(cgroupRoot, path, "memory.swap.max"))
			return err == nil
		}
	}
	return false
})

// MemTotal is MemTotal from /proc/meminfo, in bytes.
func MemTotal() (int64, error) {
	data, err := os.ReadFile(meminfoPath)
	if err != nil {
		return 0, fmt.Errorf("read memory size: %w", err)
	}
	return parseMemTotal(data)
}

func parseMemTotal(meminfo []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "MemTotal:" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse MemTotal %q: %w", fields[1], err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no MemTotal in %s", meminfoPath)
}
