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
)

// CPU conversions of the kubelet (pkg/kubelet/cm/helpers_linux.go).
const (
	MinShares    = 2      // the kernel's floor for cpu.shares
	MaxShares    = 262144 // the kernel's ceiling for cpu.shares
	sharesPerCPU = 1024   // cpu.shares of one whole CPU
	milliPerCPU  = 1000   // millicores in one CPU
	QuotaPeriod  = 100000 // CFS period in µs: 100ms
	minQuota     = 1000   // CFS quota floor in µs: 1ms
)

// Where the host's resources are read.
const (
	meminfoPath   = "/proc/meminfo"
	cgroupRoot    = "/sys/fs/cgroup"
	memswV1       = cgroupRoot + "/memory/memory.memsw.limit_in_bytes"
	unifiedMarker = cgroupRoot + "/cgroup.controllers"
)

// Resources turns the container's requests and limits into cgroup settings as the
// kubelet does (kuberuntime calculateLinuxResources): cpu.shares from the CPU request
// (from the limit when only a limit is set), a CFS quota from the CPU limit, and the
// memory limit, with swap held to that limit where the kernel accounts swap; and the
// OOM score of the container's QoS class, never below staticpod's own (oomScoreOpts).
func Resources(in Input) ([]oci.SpecOpts, error) {
	opts, err := oomScoreOpts(in, MemTotal, OwnOOMScoreAdj)
	if err != nil {
		return nil, err
	}
	res := in.Container.Resources
	cpuRequest, cpuLimit := res.Requests.Cpu().MilliValue(), res.Limits.Cpu().MilliValue()
	opts = append(opts, oci.WithCPUShares(CPUShares(cpuRequest, cpuLimit)))
	if cpuLimit > 0 {
		opts = append(opts, oci.WithCPUCFS(CPUQuota(cpuLimit), QuotaPeriod))
	}
	if limit := res.Limits.Memory().Value(); limit > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(limit)))
		if SwapAccounted() {
			// memory+swap equal to memory: no swap beyond the limit (the kubelet's
			// NoSwap). runc writes memory.swap.max = 0 for it on cgroup v2.
			opts = append(opts, oci.WithMemorySwap(limit))
		}
	}
	return opts, nil
}

// CPUShares is the kubelet's MilliCPUToShares of the request, or of the limit when
// only a limit is set (the apiserver defaults the request to the limit; the kubelet
// repeats it). No CPU at all gets the minimum, 2, which is the kernel's value for zero.
func CPUShares(requestMilli, limitMilli int64) uint64 {
	milli := requestMilli
	if milli == 0 && limitMilli > 0 {
		milli = limitMilli
	}
	if milli == 0 {
		return MinShares
	}
	shares := milli * sharesPerCPU / milliPerCPU
	return uint64(min(max(shares, MinShares), MaxShares))
}

// CPUQuota is the kubelet's MilliCPUToQuota: the limit's share of a 100ms period, at
// least 1ms.
func CPUQuota(limitMilli int64) int64 {
	return max(limitMilli*QuotaPeriod/milliPerCPU, minQuota)
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
