package stats

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
)

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "side"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", ContainerID: "containerd://c1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: "side", ContainerID: "containerd://c2", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}},
		}},
	}
}

func v1Cgroup(t testing.TB, mount, dir string, cpu, mem uint64) {
	t.Helper()
	writeFiles(t, mount, map[string]string{
		filepath.Join("cpuacct", dir, "cpuacct.usage"):        itoa(cpu),
		filepath.Join("memory", dir, "memory.usage_in_bytes"): itoa(mem),
		filepath.Join("memory", dir, "memory.stat"):           "total_inactive_file 0\n",
	})
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// cgroupfsPods places pods as the cgroupfs driver does under /staticpod.
func cgroupfsPods(t testing.TB) cgroups.Pods {
	t.Helper()
	pods, err := cgroups.New(cgroups.Config{Driver: cgroups.Cgroupfs, Root: "/staticpod"})
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// v1PodCgroups writes the node's cgroup, pod's and its container c1's under mount.
func v1PodCgroups(t testing.TB, mount string, pods cgroups.Pods, pod *corev1.Pod) {
	t.Helper()
	podDir := pods.PodDir(pod)
	v1Cgroup(t, mount, "/", 100e9, 500e6)
	v1Cgroup(t, mount, podDir, 2e9, 20e6)
	v1Cgroup(t, mount, podDir+"/c1", 1e9, 17e6)
}
func TestSamplerReportsPodsContainersAndCPURate(t *testing.T) {
	mount, logDir := t.TempDir(), t.TempDir()
	pods, err := cgroups.New(cgroups.Config{Driver: cgroups.Cgroupfs, Root: "/staticpod"})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod()
	podDir := pods.PodDir(pod)
	if podDir != "/staticpod/besteffort/podu1" {
		t.Fatalf("pod dir = %s", podDir)
	}
	v1Cgroup(t, mount, "/", 100e9, 500e6)
	v1Cgroup(t, mount, podDir, 2e9, 20e6)
	v1Cgroup(t, mount, podDir+"/c1", 1e9, 17e6)
	writeFiles(t, logDir, map[string]string{"default_web_u1/app/0.log": "0123456789", "stat": "cpu  1 2 3\nbtime 1700000000\n"})
	now := time.Unix(1000, 0)
	no := false
	s := New(Config{Pods: func() []*corev1.Pod { return []*corev1.Pod{pod} }, Cgroups: pods, Node: "n1",
		PodLogDir: logDir, Stat: filepath.Join(logDir, "stat"), Mount: mount, Unified: &no, Now: func() time.Time { return now }})
	s.Sample()
	sum := s.Summary()
	if sum.Node.NodeName != "n1" || !sum.Node.StartTime.Equal(&metav1.Time{Time: time.Unix(1700000000, 0)}) || *sum.Node.Memory.WorkingSetBytes != 500e6 || sum.Node.CPU.UsageNanoCores != nil {
		t.Fatalf("node = %+v", sum.Node)
	}
	if len(sum.Pods) != 1 || len(sum.Pods[0].Containers) != 1 {
		t.Fatalf("pods = %+v", sum.Pods)
	}
	ps := sum.Pods[0]
	if ps.PodRef.Name != "web" || *ps.Memory.WorkingSetBytes != 20e6 || ps.Containers[0].Name != "app" ||
		*ps.Containers[0].Memory.WorkingSetBytes != 17e6 || ps.EphemeralStorage != nil {
		t.Fatalf("pod = %+v", ps)
	}
	// 10 s later the container used 0.5 s more CPU: 50 millicores.
	now = now.Add(10 * time.Second)
	v1Cgroup(t, mount, podDir+"/c1", 1.5e9, 17e6)
	s.Sample()
	c := s.Summary().Pods[0].Containers[0]
	if c.CPU.UsageNanoCores == nil || *c.CPU.UsageNanoCores != 50e6 || *c.CPU.UsageCoreNanoSeconds != 1.5e9 {
		t.Fatalf("container cpu = %+v", c.CPU)
	}
}

func TestSamplerReadsNothingWithoutPods(t *testing.T) {
	mount := t.TempDir()
	v1Cgroup(t, mount, "/", 1, 1)
	no := false
	s := New(Config{Pods: func() []*corev1.Pod { return nil }, Mount: mount, Unified: &no})
	s.Sample()
	if n, _ := s.Samples(); n != 1 {
		t.Fatalf("samples = %d", n)
	}
	// The node's cgroup is readable: had the sampler read it, the node would have CPU.
	if sum := s.Summary(); sum.Node.CPU != nil || len(sum.Pods) != 0 {
		t.Fatalf("summary without pods = %+v", sum)
	}
}

// A read of figures older than the period samples first, so that they are never older
// than the kubelet's; a read of younger ones reads no cgroup. The CPU rate of a read
// after a quiet spell is over that spell.
func TestSummarySamplesWhenTheLatestIsOlderThanThePeriod(t *testing.T) {
	mount, pods, pod := t.TempDir(), cgroupfsPods(t), testPod()
	podDir := pods.PodDir(pod)
	v1PodCgroups(t, mount, pods, pod)
	now := time.Unix(1000, 0)
	no := false
	s := New(Config{Pods: func() []*corev1.Pod { return []*corev1.Pod{pod} }, Cgroups: pods, Mount: mount, Unified: &no,
		Now: func() time.Time { return now }})
	s.Sample()
	v1Cgroup(t, mount, podDir+"/c1", 4e9, 17e6) // 3 s more CPU
	now = now.Add(DefaultPeriod - time.Second)
	if c := s.Summary().Pods[0].Containers[0]; *c.CPU.UsageCoreNanoSeconds != 1e9 {
		t.Errorf("a read %s after the sample read the cgroups again: %d ns of CPU, want the sample's 1e9", DefaultPeriod-time.Second, *c.CPU.UsageCoreNanoSeconds)
	}
	if n, _ := s.Samples(); n != 1 {
		t.Errorf("samples = %d after a read of a young sample, want 1", n)
	}
	now = now.Add(51 * time.Second) // a minute after the sample
	c := s.Summary().Pods[0].Containers[0]
	if n, _ := s.Samples(); n != 2 {
		t.Fatalf("samples = %d after a read of a sample older than the period, want 2", n)
	}
	if *c.CPU.UsageCoreNanoSeconds != 4e9 || c.CPU.UsageNanoCores == nil || *c.CPU.UsageNanoCores != 50e6 {
		t.Errorf("container cpu = %+v, want 4e9 ns and 3 s over the minute since the sample before: 50e6 nanocores", c.CPU)
	}
}

// Unread, the sampler reads the cgroups at once and then on its idle period, not on
// its period.
func TestSamplerUnreadSamplesOnItsIdlePeriod(t *testing.T) {
	mount := t.TempDir()
	v1Cgroup(t, mount, "/", 1, 1)
	no := false
	const idle = 2 * time.Second
	s := New(Config{Pods: func() []*corev1.Pod { return []*corev1.Pod{testPod()} }, Mount: mount, Unified: &no,
		Period: time.Millisecond, IdlePeriod: idle})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := s.Samples(); n == 0; n, _ = s.Samples() {
		if time.Now().After(deadline) {
			t.Fatal("no sample at the start")
		}
		time.Sleep(time.Millisecond)
	}
	first := time.Now()
	time.Sleep(200 * time.Millisecond) // two hundred periods
	n, next := s.Samples()
	if time.Since(first) < idle && n != 1 {
		t.Errorf("%d samples in the first %s of a %s idle period, want 1", n, time.Since(first).Round(time.Millisecond), idle)
	}
	select {
	case <-next:
	case <-time.After(10 * time.Second):
		t.Fatal("no second sample after the idle period")
	}
}

// A sample taken while no pod was wanted is no reason not to look: a read right after
// the first pod appears reads its cgroups.
func TestSummaryAfterASampleWithoutPodsLooksAgain(t *testing.T) {
	mount, pods, pod := t.TempDir(), cgroupfsPods(t), testPod()
	v1PodCgroups(t, mount, pods, pod)
	var wanted []*corev1.Pod
	now := time.Unix(1000, 0)
	no := false
	s := New(Config{Pods: func() []*corev1.Pod { return wanted }, Cgroups: pods, Mount: mount, Unified: &no,
		Now: func() time.Time { return now }})
	s.Sample()
	wanted = []*corev1.Pod{pod}
	now = now.Add(time.Second)
	if sum := s.Summary(); len(sum.Pods) != 1 {
		t.Errorf("a read a second after a sample without pods, with one wanted now, shows pods %+v, want it", sum.Pods)
	}
}
