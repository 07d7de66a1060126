// Package node is the node staticpod runs as, as the kubelet describes it to an
// apiserver: its name, labels (--node-labels and the well-known ones), taints
// (--register-with-taints), capacity and allocatable (capacity less --system-reserved
// and --kube-reserved); and whether a pod fits it, as the kubelet admits a pod
// (Fits, Ledger). It decides, it never runs anything: it imports manifests alone of
// staticpod's packages.
package node

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config is what the flags say of the node.
type Config struct {
	Name           string            // the node name (--hostname-override)
	Labels         map[string]string // --node-labels; the well-known labels are added
	Taints         []corev1.Taint    // --register-with-taints
	SystemReserved corev1.ResourceList
	KubeReserved   corev1.ResourceList
	// Capacity is the machine's CPU and memory; Probe's when nil.
	Capacity corev1.ResourceList
}

// New returns the node that cfg describes: the well-known labels as the kubelet sets
// them (kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch; a --node-labels
// value overrides one, as on the kubelet), its taints, its capacity and allocatable.
// Its conditions are the caller's (Ready).
func New(cfg Config) (*corev1.Node, error) {
	capacity := cfg.Capacity
	if capacity == nil {
		var err error
		if capacity, err = Probe(); err != nil {
			return nil, err
		}
	}
	labels := map[string]string{
		corev1.LabelHostname:   cfg.Name,
		corev1.LabelOSStable:   runtime.GOOS,
		corev1.LabelArchStable: runtime.GOARCH,
	}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	n := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: cfg.Taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: Allocatable(capacity, cfg.SystemReserved, cfg.KubeReserved),
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH, KernelVersion: kernelVersion(),
			},
		},
	}
	return n, nil
}

// Allocatable is capacity less what is reserved for the system and for staticpod
// itself, as the kubelet computes it (never below zero). The kubelet also takes its
// hard eviction threshold off memory; staticpod evicts nothing, so it has none.
func Allocatable(capacity corev1.ResourceList, reserved ...corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range capacity {
		left := q.DeepCopy()
		for _, r := range reserved {
			if rq, ok := r[name]; ok {
				left.Sub(rq)
			}
		}
		if left.Sign() < 0 {
			left = *resource.NewQuantity(0, q.Format)
		}
		out[name] = left
	}
	return out
}

// Probe reads the machine's capacity: its CPUs and its memory (MemTotal), as the
// kubelet reads them from cAdvisor.
func Probe() (corev1.ResourceList, error) {
	mem, err := memTotal("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
	}, nil
}

// memTotal is MemTotal of a meminfo file, in bytes.
func memTotal(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read memory capacity: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("read memory capacity: no MemTotal in %s", path)
}

// kernelVersion is the running kernel's release, "" when unknown.
func kernelVersion() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
