package spec

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// The kubelet's OOM score adjustments (pkg/kubelet/qos/policy.go). Burstable
// containers score strictly between Guaranteed and BestEffort ones.
const (
	SandboxOOMScoreAdj      = -998 // the pod's sandbox (the kubelet's PodInfraOOMAdj)
	guaranteedOOMScoreAdj   = -997
	bestEffortOOMScoreAdj   = 1000
	minBurstableOOMScoreAdj = 1000 + guaranteedOOMScoreAdj // 3
	maxBurstableOOMScoreAdj = bestEffortOOMScoreAdj - 1    // 999

	// systemNodeCritical is the priority class (scheduling.SystemNodeCritical) that
	// makes a static pod node-critical: kubeadm gives it to its control-plane pods.
	systemNodeCritical = "system-node-critical"

	// ownOOMScoreAdjPath is staticpod's own score, the floor of its containers'.
	ownOOMScoreAdjPath = "/proc/self/oom_score_adj"
)

// oomScoreOpts sets the container's oom_score_adj to the kubelet's score for it
// (oomScoreAdj), but never below staticpod's own score, read from floor. Without it a
// container inherits its shim's score, one above containerd's: -998 under systemd's
// containerd.service, so a runaway container was among the last processes the kernel
// would kill. The floor is containerd's CRI with restrict_oom_score_adj: lowering a
// score needs CAP_SYS_RESOURCE, which staticpod may lack (runc would then fail to
// start the container), and no container should be better protected than the
// runner that supervises it. Run staticpod at -999, as the kubelet runs, and its
// containers get the kubelet's scores exactly. capacity, the machine's memory, is
// read only for a Burstable container.
func oomScoreOpts(in Input, capacity func() (int64, error), floor func() (int, error)) ([]oci.SpecOpts, error) {
	score, err := oomScoreAdj(in.Pod, in.Container, capacity)
	if err != nil {
		return nil, fmt.Errorf("container %q: oom score: %w", in.Container.Name, err)
	}
	own, err := floor()
	if err != nil {
		return nil, fmt.Errorf("container %q: oom score: %w", in.Container.Name, err)
	}
	return []oci.SpecOpts{WithOOMScoreAdj(max(score, own))}, nil
}

// oomScoreAdj is the kubelet's GetContainerOOMScoreAdjust for c. Every pod here is a
// static pod, which the kubelet counts as critical (kubetypes.IsCriticalPod), but only
// a node-critical one (priorityClassName system-node-critical, IsNodeCriticalPod) gets
// the Guaranteed score whatever its resources; others score by QoS class:
// Guaranteed -997, BestEffort 1000, Burstable 1000 - 1000*memoryRequest/capacity held
// to [3, 999], where a sidecar scores no higher than the regular container with the
// smallest request. A pod-level memory request counts too: what the containers do not
// request of it themselves is shared equally among them (podMemoryShare).
func oomScoreAdj(pod *corev1.Pod, c *corev1.Container, capacity func() (int64, error)) (int, error) {
	if pod.Spec.PriorityClassName == systemNodeCritical {
		return guaranteedOOMScoreAdj, nil
	}
	switch manifests.QOSClass(pod) { // as the pod's status reports it
	case corev1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj, nil
	case corev1.PodQOSBestEffort:
		return bestEffortOOMScoreAdj, nil
	}
	memory, err := capacity()
	if err != nil {
		return 0, err
	}
	if memory <= 0 {
		return 0, fmt.Errorf("machine memory capacity %d", memory)
	}
	share := podMemoryShare(pod)
	score := burstableScore(c.Resources.Requests.Memory().Value()+share, memory)
	if manifests.IsSidecar(c) { // validation allows restartPolicy on init containers only
		score = min(score, burstableScore(minRegularMemoryRequest(pod)+share, memory))
	}
	return int(min(max(score, minBurstableOOMScoreAdj), maxBurstableOOMScoreAdj)), nil
}

// podMemoryShare is the kubelet's remainingPodMemReqPerContainer: the part of the
// pod-level memory request its containers do not request themselves, divided among
// all of them, init containers included; 0 without a pod-level memory request.
func podMemoryShare(pod *corev1.Pod) int64 {
	if !manifests.HasPodResources(pod) {
		return 0
	}
	podRequest := pod.Spec.Resources.Requests.Memory().Value()
	if podRequest == 0 {
		return 0
	}
	containers := manifests.ContainerRequests(pod)
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	return (podRequest - containers.Memory().Value()) / n
}

// burstableScore is the kubelet's heuristic: a container that requests 10% of the
// machine's memory scores 900, so that once it uses more than it asked for it scores
// 1000 and is among the first the kernel kills.
func burstableScore(request, capacity int64) int64 {
	return 1000 - 1000*request/capacity
}

// minRegularMemoryRequest is the smallest memory request of the pod's regular
// containers (init containers left out), as the kubelet's minRegularContainerMemory.
func minRegularMemoryRequest(pod *corev1.Pod) int64 {
	var least int64
	for i, c := range pod.Spec.Containers {
		if r := c.Resources.Requests.Memory().Value(); i == 0 || r < least {
			least = r
		}
	}
	return least
}

// WithOOMScoreAdj sets the process's oom_score_adj, which runc writes before it
// starts the container's process.
func WithOOMScoreAdj(score int) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		s.Process.OOMScoreAdj = &score
		return nil
	}
}

// OwnOOMScoreAdj is staticpod's own oom_score_adj.
func OwnOOMScoreAdj() (int, error) {
	data, err := os.ReadFile(ownOOMScoreAdjPath)
	if err != nil {
		return 0, fmt.Errorf("read own oom_score_adj: %w", err)
	}
	score, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("parse own oom_score_adj: %w", err)
	}
	return score, nil
}
