package stats

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
)

// BenchmarkSample20Pods is one sample of 20 pods of one container each on fixture
// files: the sampler's cost per period (10 s) at BENCH.md's 20 pods.
func BenchmarkSample20Pods(b *testing.B) {
	mount, logDir := b.TempDir(), b.TempDir()
	pods, _ := cgroups.New(cgroups.Config{Driver: cgroups.Cgroupfs, Root: "/staticpod"})
	var list []*corev1.Pod
	v1Cgroup(b, mount, "/", 1, 1)
	for i := range 20 {
		p := testPod()
		p.Name, p.UID = fmt.Sprintf("web%d", i), types.UID(fmt.Sprintf("u%d", i))
		v1Cgroup(b, mount, pods.PodDir(p), 1, 1)
		v1Cgroup(b, mount, pods.PodDir(p)+"/c1", 1, 1)
		writeFiles(b, logDir, map[string]string{fmt.Sprintf("default_%s_%s/app/0.log", p.Name, p.UID): "x"})
		list = append(list, p)
	}
	no := false
	s := New(Config{Pods: func() []*corev1.Pod { return list }, Cgroups: pods, PodLogDir: logDir, Mount: mount, Unified: &no})
	b.ResetTimer()
	for b.Loop() {
		s.Sample()
	}
	if sum := s.Summary(); len(sum.Pods) != 20 || len(sum.Pods[0].Containers) != 1 {
		b.Fatalf("sampled %d pods", len(sum.Pods))
	}
}
