package stats

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
)

// fakeDisks keeps pods' volumes under root/<uid>/<volume> and counts what is asked.
type fakeDisks struct {
	t      *testing.T
	root   string
	layers map[string]DiskUsage
	asked  []string // volumes, "layers" and "imagefs", in order
}

func (f *fakeDisks) VolumeDir(uid types.UID, volume string) (string, error) {
	f.asked = append(f.asked, volume)
	return filepath.Join(f.root, string(uid), volume), nil
}

func (f *fakeDisks) EtcHosts(uid types.UID) (string, error) {
	return filepath.Join(f.root, string(uid), "etc-hosts"), nil
}

func (f *fakeDisks) Layers(_ context.Context, ids []string) (map[string]DiskUsage, error) {
	f.asked = append(f.asked, "layers")
	out := map[string]DiskUsage{}
	for _, id := range ids {
		if u, ok := f.layers[id]; ok {
			out[id] = u
		}
	}
	return out, nil
}

func (f *fakeDisks) ImageFs(context.Context) (string, DiskUsage, error) {
	f.asked = append(f.asked, "imagefs")
	return f.root, DiskUsage{Bytes: 300 << 20, Inodes: 900}, nil
}

func diskPod() *corev1.Pod {
	p := testPod()
	p.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "ram", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
	}
	return p
}

func TestSampleDisksFillsVolumesRootfsLogsAndEphemeralStorage(t *testing.T) {
	mount, logDir, root := t.TempDir(), t.TempDir(), t.TempDir()
	pods, err := cgroups.New(cgroups.Config{Driver: cgroups.Cgroupfs, Root: "/staticpod"})
	must(t, err)
	pod := diskPod()
	v1Cgroup(t, mount, "/", 1, 1)
	v1Cgroup(t, mount, pods.PodDir(pod), 1, 1)
	v1Cgroup(t, mount, pods.PodDir(pod)+"/c1", 1, 1)
	volumes := filepath.Join(root, "u1")
	writeFiles(t, volumes, map[string]string{"scratch/data": string(bytes.Repeat([]byte{1}, 1<<20)), "conf/key": "v", "etc-hosts": "127.0.0.1 localhost\n"})
	must(t, os.Mkdir(filepath.Join(volumes, "ram"), 0o755))
	writeFiles(t, logDir, map[string]string{"default_web_u1/app/0.log": string(bytes.Repeat([]byte{2}, 100<<10))})
	disks := &fakeDisks{t: t, root: root, layers: map[string]DiskUsage{"c1": {Bytes: 8192, Inodes: 3}}}
	now := time.Unix(1000, 0)
	no := false
	s := New(Config{Pods: func() []*corev1.Pod { return []*corev1.Pod{pod} }, Cgroups: pods, Node: "n1",
		PodLogDir: logDir, Disks: disks, RootDir: root, Mount: mount, Unified: &no, Now: func() time.Time { return now }})
	s.Sample()
	s.SampleDisks(context.Background())
	sum := s.Summary()

	if slices.Contains(disks.asked, "host") {
		t.Errorf("a hostPath volume was looked at: %v", disks.asked)
	}
	ps := sum.Pods[0]
	byName := map[string]statsapi.VolumeStats{}
	for _, v := range ps.VolumeStats {
		byName[v.Name] = v
	}
	if len(ps.VolumeStats) != 3 || byName["scratch"].UsedBytes == nil || *byName["scratch"].UsedBytes < 1<<20 ||
		*byName["scratch"].InodesUsed != 2 || *byName["ram"].InodesUsed != 1 || byName["conf"].CapacityBytes == nil {
		t.Fatalf("volumes = %+v", ps.VolumeStats)
	}
	c := ps.Containers[0]
	if c.Rootfs == nil || *c.Rootfs.UsedBytes != 8192 || *c.Rootfs.InodesUsed != 3 || c.Rootfs.CapacityBytes == nil {
		t.Fatalf("rootfs = %+v", c.Rootfs)
	}
	if c.Logs == nil || *c.Logs.UsedBytes < 100<<10 || *c.Logs.InodesUsed != 2 || c.Logs.AvailableBytes == nil {
		t.Fatalf("logs = %+v", c.Logs)
	}
	// Ephemeral storage: the writable layer, the logs, the emptyDir on disk, the
	// configMap and /etc/hosts; not the memory-backed emptyDir.
	e := ps.EphemeralStorage
	etc := blocks(t, filepath.Join(volumes, "etc-hosts"))
	want := 8192 + *c.Logs.UsedBytes + *byName["scratch"].UsedBytes + *byName["conf"].UsedBytes + etc
	if e == nil || *e.UsedBytes != want || *e.InodesUsed != 3+2+2+2+1 || e.CapacityBytes == nil || *e.CapacityBytes != *sum.Node.Fs.CapacityBytes {
		t.Fatalf("ephemeral storage = %+v, want %d bytes", e, want)
	}
	if sum.Node.Fs == nil || sum.Node.Fs.UsedBytes == nil || sum.Node.Runtime == nil || *sum.Node.Runtime.ImageFs.UsedBytes != 300<<20 ||
		sum.Node.Runtime.ImageFs.CapacityBytes == nil {
		t.Fatalf("node fs = %+v, runtime = %+v", sum.Node.Fs, sum.Node.Runtime)
	}
}

func TestSampleDisksMeasuresAPodOncePerDiskPeriodAndNothingWithoutPods(t *testing.T) {
	root := t.TempDir()
	pod := diskPod()
	writeFiles(t, filepath.Join(root, "u1"), map[string]string{"scratch/data": "x"})
	var wanted []*corev1.Pod
	disks := &fakeDisks{t: t, root: root}
	now := time.Unix(1000, 0)
	s := New(Config{Pods: func() []*corev1.Pod { return wanted }, Disks: disks, RootDir: root, PodLogDir: t.TempDir(),
		Now: func() time.Time { return now }})
	ctx := context.Background()

	s.SampleDisks(ctx)
	if len(disks.asked) != 0 {
		t.Fatalf("without pods the sampler asked for %v", disks.asked)
	}
	wanted = []*corev1.Pod{pod}
	s.SampleDisks(ctx)
	first := len(disks.asked)
	if first == 0 {
		t.Fatal("a new pod was not measured")
	}
	now = now.Add(DefaultPeriod)
	s.SampleDisks(ctx)
	if len(disks.asked) != first {
		t.Fatalf("measured again within the disk period: %v", disks.asked[first:])
	}
	// A container that restarted has a new writable layer: measured at once.
	restarted := diskPod()
	restarted.Status.ContainerStatuses[0].ContainerID = "containerd://c3"
	wanted = []*corev1.Pod{restarted}
	s.SampleDisks(ctx)
	if got := disks.asked[first:]; !slices.Contains(got, "layers") || slices.Contains(got, "imagefs") {
		t.Fatalf("after a restart the sampler asked for %v, want the pod's layers and not the image fs", got)
	}
	second := len(disks.asked)
	now = now.Add(DefaultDiskPeriod)
	s.SampleDisks(ctx)
	if got := disks.asked[second:]; !slices.Contains(got, "scratch") || !slices.Contains(got, "imagefs") {
		t.Fatalf("after the disk period the sampler asked for %v", got)
	}
	if n := s.DiskSamples(); n != 5 {
		t.Fatalf("disk samples = %d, want 5", n)
	}
}
