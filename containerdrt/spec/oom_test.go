package spec

import (
	"errors"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	corev1 "k8s.io/api/core/v1"
)

const oomTestCapacity = 4 << 30 // 4 GiB

func oomTestCapacityFunc() (int64, error) { return oomTestCapacity, nil }

// oomTestPod is the spec test pod with app's requests and limits set, and edit applied.
func oomTestPod(requests, limits corev1.ResourceList, edit func(*corev1.Pod)) Input {
	in := specTestInput(ocispec.ImageConfig{})
	in.Container.Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	if edit != nil {
		edit(in.Pod)
	}
	return in
}

func TestOOMScoreAdj(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		name             string
		requests, limits corev1.ResourceList
		edit             func(*corev1.Pod)
		container        func(*corev1.Pod) *corev1.Container // app when nil
		want             int
	}{
		{name: "best effort", want: 1000},
		{name: "guaranteed", requests: podtest.Resources("1", "1Gi"), limits: podtest.Resources("1", "1Gi"), want: -997},
		{name: "burstable: a quarter of the memory", requests: podtest.Resources("", "1Gi"), limits: podtest.Resources("", "2Gi"), want: 750},
		{name: "burstable: cpu only, below best effort", requests: podtest.Resources("100m", ""), want: 999},
		{name: "burstable: all the memory, above guaranteed", requests: podtest.Resources("", "4Gi"), limits: podtest.Resources("", "8Gi"), want: 3},
		{name: "burstable: more than the machine", requests: podtest.Resources("", "8Gi"), want: 3},
		{name: "node-critical best effort", want: -997,
			edit: func(p *corev1.Pod) { p.Spec.PriorityClassName = systemNodeCritical }},
		{name: "cluster-critical is by QoS", requests: podtest.Resources("", "1Gi"), want: 750,
			edit: func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }},
		{name: "sidecar: no higher than the smallest regular request", requests: podtest.Resources("", "2Gi"), want: 500,
			edit: func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always,
					Resources: corev1.ResourceRequirements{Requests: podtest.Resources("", "100Mi")}}}
			},
			container: func(p *corev1.Pod) *corev1.Container { return &p.Spec.InitContainers[0] }},
		{name: "pod-level request shared by the containers", want: 750,
			edit: func(p *corev1.Pod) {
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: podtest.Resources("", "2Gi"), Limits: podtest.Resources("", "4Gi")}
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "helper"})
			}},
		{name: "pod-level request beyond the containers' own", requests: podtest.Resources("", "1Gi"), limits: podtest.Resources("", "1Gi"), want: 500,
			edit: func(p *corev1.Pod) {
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: podtest.Resources("", "3Gi"), Limits: podtest.Resources("", "4Gi")}
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "helper"})
			}},
		{name: "pod-level guaranteed", want: -997,
			edit: func(p *corev1.Pod) {
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: podtest.Resources("1", "1Gi"), Limits: podtest.Resources("1", "1Gi")}
			}},
		{name: "plain init container: its own request", requests: podtest.Resources("", "2Gi"), want: 976,
			edit: func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "setup",
					Resources: corev1.ResourceRequirements{Requests: podtest.Resources("", "100Mi")}}}
			},
			container: func(p *corev1.Pod) *corev1.Container { return &p.Spec.InitContainers[0] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := oomTestPod(tc.requests, tc.limits, tc.edit)
			c := in.Container
			if tc.container != nil {
				c = tc.container(in.Pod)
			}
			got, err := oomScoreAdj(in.Pod, c, oomTestCapacityFunc)
			if err != nil || got != tc.want {
				t.Errorf("oomScoreAdj(%s) = %d, %v; want %d, nil", tc.name, got, err, tc.want)
			}
		})
	}
}

// The container's score is the kubelet's, raised to staticpod's own where that is
// higher: lowering a score needs CAP_SYS_RESOURCE.
func TestOOMScoreOptsFloor(t *testing.T) {
	guaranteed := podtest.Resources("1", "1Gi")
	for _, tc := range []struct {
		name             string
		requests, limits corev1.ResourceList
		floor            int
		want             int
	}{
		{name: "guaranteed above the kubelet's floor", requests: guaranteed, limits: guaranteed, floor: -999, want: -997},
		{name: "guaranteed at staticpod's 0", requests: guaranteed, limits: guaranteed, floor: 0, want: 0},
		{name: "burstable above the floor", requests: podtest.Resources("", "1Gi"), floor: 0, want: 750},
		{name: "burstable below a high floor", requests: podtest.Resources("", "1Gi"), floor: 800, want: 800},
		{name: "best effort", floor: -999, want: 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := oomTestPod(tc.requests, tc.limits, nil)
			opts, err := oomScoreOpts(in, oomTestCapacityFunc, func() (int, error) { return tc.floor, nil })
			if err != nil {
				t.Fatalf("oomScoreOpts: %v", err)
			}
			s := specFromOpts(t, "", opts)
			if s.Process.OOMScoreAdj == nil || *s.Process.OOMScoreAdj != tc.want {
				t.Errorf("process.oomScoreAdj = %v, want %d", s.Process.OOMScoreAdj, tc.want)
			}
		})
	}
}

// The machine's memory is read only for a Burstable container, and a failure to read
// it or staticpod's own score is an error, not a container left at its shim's score.
func TestOOMScoreOptsErrors(t *testing.T) {
	noCapacity := func() (int64, error) { return 0, errors.New("no meminfo") }
	floor := func() (int, error) { return 0, nil }
	if _, err := oomScoreOpts(oomTestPod(nil, nil, nil), noCapacity, floor); err != nil {
		t.Errorf("best effort with unreadable memory: %v, want no error", err)
	}
	if _, err := oomScoreOpts(oomTestPod(podtest.Resources("", "1Gi"), nil, nil), noCapacity, floor); err == nil {
		t.Error("burstable with unreadable memory succeeded, want an error")
	}
	noFloor := func() (int, error) { return 0, errors.New("no proc") }
	if _, err := oomScoreOpts(oomTestPod(nil, nil, nil), oomTestCapacityFunc, noFloor); err == nil {
		t.Error("unreadable own score succeeded, want an error")
	}
}

func TestOwnOOMScoreAdj(t *testing.T) {
	if _, err := OwnOOMScoreAdj(); err != nil {
		t.Errorf("OwnOOMScoreAdj: %v", err)
	}
}
