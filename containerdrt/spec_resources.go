package containerdrt

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/pkg/oci"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
)

// Where the host's resources are read.
const (
	meminfoPath = "/proc/meminfo"
	cgroupRoot  = cgroups.MountPoint
	memswV1     = cgroupRoot + "/memory/memory.memsw.limit_in_bytes"
)

// resourceOpts turns the container's requests and limits into cgroup settings as the
// kubelet does (kuberuntime calculateLinuxResources): cpu.shares from the CPU request
// (from the limit when only a limit is set), a CFS quota from the CPU limit, and the
// memory limit, with swap held to that limit where the kernel accounts swap; and the
// OOM score of the container's QoS class, never below staticpod's own (oomScoreOpts).
func resourceOpts(in specInput) ([]oci.SpecOpts, error) {
	opts, err := oomScoreOpts(in, memTotal, ownOOMScoreAdj)
	if err != nil {
		return nil, err
	}
	res := in.Container.Resources
	cpuRequest, cpuLimit := res.Requests.Cpu().MilliValue(), res.Limits.Cpu().MilliValue()
	opts = append(opts, oci.WithCPUShares(cgroups.CPUShares(cpuRequest, cpuLimit)))
	if cpuLimit > 0 {
		opts = append(opts, oci.WithCPUCFS(cgroups.CPUQuota(cpuLimit), cgroups.QuotaPeriod))
	}
	if limit := res.Limits.Memory().Value(); limit > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(limit)))
		if swapAccounted() {
			// memory+swap equal to memory: no swap beyond the limit (the kubelet's
			// NoSwap). runc writes memory.swap.max = 0 for it on cgroup v2.
			opts = append(opts, oci.WithMemorySwap(limit))
		}
	}
	return opts, nil
}

// swapAccounted reports whether the kernel accounts swap per cgroup, as containerd's
// CRI checks before setting swap: memory.memsw.* on cgroup v1, memory.swap.max in our
// own cgroup on v2. When unsure it says no and swap is left unset.
var swapAccounted = sync.OnceValue(func() bool {
	if !hostCgroups().unified {
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

// resourceFieldRefValue is the downward API value of a resourceFieldRef, as the
// kubelet's ExtractContainerResourceValue computes it: CPU in whole divisor units
// rounded up (divisor 1 by default), memory, ephemeral storage and huge pages likewise
// in bytes. A limit that is not set is the node's allocatable amount
// (defaultPodLimitsForDownwardAPI), here the whole host.
func resourceFieldRefValue(in specInput, ref *corev1.ResourceFieldSelector) (string, error) {
	c, err := refContainer(in, ref.ContainerName)
	if err != nil {
		return "", err
	}
	divisor := resource.MustParse("1")
	if !ref.Divisor.IsZero() {
		divisor = ref.Divisor
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resourceFieldRef %q is not supported", ref.Resource)
	}
	var list corev1.ResourceList
	if kind == "requests" {
		list = c.Resources.Requests
	} else {
		list = withAllocatable(c.Resources.Limits, in.PodDir)
	}
	rn := corev1.ResourceName(name)
	if rn != corev1.ResourceCPU && rn != corev1.ResourceMemory && rn != corev1.ResourceEphemeralStorage && !strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
		return "", fmt.Errorf("resourceFieldRef %q is not supported", ref.Resource)
	}
	q := list[rn]
	if rn == corev1.ResourceCPU {
		return strconv.FormatInt(ceilDiv(q.MilliValue(), divisor.MilliValue()), 10), nil
	}
	return strconv.FormatInt(ceilDiv(q.Value(), divisor.Value()), 10), nil
}

// refContainer is the container a resourceFieldRef names: this one when the name is
// empty, else any container of the pod.
func refContainer(in specInput, name string) (*corev1.Container, error) {
	if name == "" || name == in.Container.Name {
		return in.Container, nil
	}
	for _, list := range [][]corev1.Container{in.Pod.Spec.Containers, in.Pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i], nil
			}
		}
	}
	return nil, fmt.Errorf("resourceFieldRef: no container %q in the pod", name)
}

func ceilDiv(n, d int64) int64 {
	if d <= 0 {
		return 0
	}
	q := n / d
	if n%d > 0 {
		q++
	}
	return q
}

// withAllocatable returns limits with CPU, memory and ephemeral storage that are unset
// or zero filled from the node's allocatable resources, as the kubelet's
// MergeContainerResourceLimits does. limits is not modified.
func withAllocatable(limits corev1.ResourceList, podDir string) corev1.ResourceList {
	out := limits.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range hostAllocatable(podDir) {
		if cur, ok := out[name]; !ok || cur.IsZero() {
			out[name] = q
		}
	}
	return out
}

// hostAllocatable is what a kubelet without reservations reports as allocatable: the
// CPUs this process may run on, MemTotal, and the size of the filesystem holding the
// pod's directory. A value that cannot be read is left out.
func hostAllocatable(podDir string) corev1.ResourceList {
	list := corev1.ResourceList{
		corev1.ResourceCPU: *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
	}
	if mem, err := memTotal(); err == nil {
		list[corev1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	var st unix.Statfs_t
	if podDir != "" && unix.Statfs(podDir, &st) == nil {
		list[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(st.Blocks)*int64(st.Bsize), resource.BinarySI)
	}
	return list
}

// memTotal is MemTotal from /proc/meminfo, in bytes.
func memTotal() (int64, error) {
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
