package containerdrt

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpod/staticpod/api"
	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/containerdrt/stats"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/events"
)

// statsBackend is the little of the runner the API needs to serve the stats: the pods.
type statsBackend struct{ pods []*corev1.Pod }

func (b statsBackend) Pods() []*corev1.Pod        { return b.pods }
func (b statsBackend) Events() *events.Store      { return nil }
func (b statsBackend) Healthy() (bool, time.Time) { return true, time.Now() }
func (b statsBackend) SourceReady(string) bool    { return true }
func (b statsBackend) Settled() bool              { return true }

// A container that holds 16 MiB (a file in its tmpfs /dev/shm, charged to its memory
// cgroup) shows a working set of at least that, in the container's and the pod's
// figures, in /stats/summary, /metrics/resource (clean under promtool) and top.
func TestStatsShowWhatAPodHolds(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: holder}
spec:
  containers:
  - name: hold
    image: `+testImage+`
    command: ["sleep", "3600"]
`)
	cs := r.mustRunPod(t, pod)
	c := r.awaitState(t, cs["hold"].ID, runner.StateRunning)
	code, err := r.Exec(r.ctx, c.ID, runner.ExecRequest{Command: []string{"sh", "-c", "head -c 16777216 /dev/zero > /dev/shm/x"}})
	if err != nil || code != 0 {
		t.Fatalf("fill /dev/shm: %d, %v", code, err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: c.StartedAt},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "hold", ContainerID: "containerd://" + c.ID,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}}}}}
	driver, root := r.Cgroups()
	podCgroups, err := cgroups.New(cgroups.Config{Driver: driver, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	sampler := stats.New(stats.Config{Pods: func() []*corev1.Pod { return []*corev1.Pod{pod} }, Cgroups: podCgroups,
		Node: "node1", PodLogDir: r.cfg.PodLogDir})
	sampler.Sample()
	code, err = r.Exec(r.ctx, c.ID, runner.ExecRequest{Command: []string{"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"}})
	if err != nil || code != 0 {
		t.Fatalf("burn CPU: %d, %v", code, err)
	}
	sampler.Sample()

	sum := sampler.Summary()
	if len(sum.Pods) != 1 || len(sum.Pods[0].Containers) != 1 {
		t.Fatalf("summary pods = %+v", sum.Pods)
	}
	ps, ctr := sum.Pods[0], sum.Pods[0].Containers[0]
	const held = 16 << 20
	if ws := *ctr.Memory.WorkingSetBytes; ws < held {
		t.Errorf("container working set = %d, want >= %d", ws, held)
	}
	if ws := *ps.Memory.WorkingSetBytes; ws < held {
		t.Errorf("pod working set = %d, want >= %d", ws, held)
	}
	if ctr.CPU.UsageNanoCores == nil || *ctr.CPU.UsageCoreNanoSeconds == 0 {
		t.Errorf("container CPU = %+v, want a rate and a cumulative time", ctr.CPU)
	}
	// The figures are the cgroup files' (cgroup v1 here), give or take what the
	// container did since.
	file := filepath.Join(cgroups.MountPoint, "memory", cgroups.Dir(podCgroups.Container(pod, c.ID)), "memory.usage_in_bytes")
	if cgroups.Unified() {
		file = filepath.Join(cgroups.MountPoint, cgroups.Dir(podCgroups.Container(pod, c.ID)), "memory.current")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	inFile, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if got := *ctr.Memory.UsageBytes; err != nil || max(got, inFile)-min(got, inFile) > 1<<20 {
		t.Errorf("container memory usage = %d, %s says %d (%v)", got, file, inFile, err)
	}

	socket := filepath.Join(t.TempDir(), "api.sock")
	srv, err := api.New(api.Config{Backend: statsBackend{[]*corev1.Pod{pod}}, Stats: sampler, Socket: socket})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics/resource", nil))
	wantLine := `container_memory_working_set_bytes{container="hold",namespace="default",pod="holder-node1"} `
	if !strings.Contains(rec.Body.String(), wantLine) {
		t.Errorf("/metrics/resource lacks %s:\n%s", wantLine, rec.Body)
	}
	testenv.PromtoolCheckMetrics(t, rec.Body.Bytes())

	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var out, errOut bytes.Buffer
	app := &cli.App{Name: "staticpod", Commands: []*cli.Command{spcli.Top()}, Writer: &out, ErrWriter: &errOut}
	if err := app.Run([]string{"staticpod", "top", "--api-socket", socket, "--containers"}); err != nil {
		t.Fatalf("top: %v %s", err, errOut.String())
	}
	fields := strings.Fields(strings.Split(out.String(), "\n")[1])
	if len(fields) != 4 || fields[0] != "holder-node1" || fields[1] != "hold" || !strings.HasSuffix(fields[3], "Mi") {
		t.Fatalf("top --containers:\n%s", out.String())
	}
	if mi, err := strconv.Atoi(strings.TrimSuffix(fields[3], "Mi")); err != nil || mi < 16 {
		t.Errorf("top shows %s, want at least 16Mi:\n%s", fields[3], out.String())
	}
}

// A pod's disks as the kubelet reports them: an emptyDir holding a 4 MiB file shows at
// least that used, a memory-backed one its tmpfs (its size is the capacity, what is in
// it the usage), the container's writable layer what was written in it, and the pod's
// ephemeral storage the emptyDir on disk, the writable layer and the logs together,
// without the tmpfs.
func TestStatsShowAPodsVolumesWritableLayerAndEphemeralStorage(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: disks}
spec:
  containers:
  - name: app
    image: `+testImage+`
    command: ["sh", "-c", "echo started; sleep 3600"]
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
    - {name: ram, mountPath: /ram}
  volumes:
  - {name: scratch, emptyDir: {}}
  - {name: ram, emptyDir: {medium: Memory, sizeLimit: 8Mi}}
`)
	cs := r.mustRunPod(t, pod)
	c := r.awaitState(t, cs["app"].ID, runner.StateRunning)
	const scratch, ram, layer = 4 << 20, 2 << 20, 1 << 20
	fill := "head -c 4194304 /dev/zero > /scratch/f && head -c 2097152 /dev/zero > /ram/f && head -c 1048576 /dev/zero > /layer"
	if code, err := r.Exec(r.ctx, c.ID, runner.ExecRequest{Command: []string{"sh", "-c", fill}}); err != nil || code != 0 {
		t.Fatalf("fill the volumes: %d, %v", code, err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: c.StartedAt},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://" + c.ID,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}}}}}
	driver, root := r.Cgroups()
	podCgroups, err := cgroups.New(cgroups.Config{Driver: driver, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	sampler := stats.New(stats.Config{Pods: func() []*corev1.Pod { return []*corev1.Pod{pod} }, Cgroups: podCgroups,
		Node: "node1", PodLogDir: r.cfg.PodLogDir, Disks: r.Runtime, RootDir: r.cfg.RootDir})
	sampler.Sample()
	sampler.SampleDisks(r.ctx)
	sum := sampler.Summary()
	if len(sum.Pods) != 1 || len(sum.Pods[0].Containers) != 1 {
		t.Fatalf("summary pods = %+v", sum.Pods)
	}
	ps, ctr := sum.Pods[0], sum.Pods[0].Containers[0]
	vols := map[string]statsapi.VolumeStats{}
	for _, v := range ps.VolumeStats {
		vols[v.Name] = v
	}
	if v, ok := vols["scratch"]; !ok || *v.UsedBytes < scratch || *v.InodesUsed < 2 || *v.CapacityBytes == 0 {
		t.Errorf("emptyDir scratch = %+v, want at least %d bytes used", v, scratch)
	}
	if v, ok := vols["ram"]; !ok || *v.UsedBytes < ram || *v.CapacityBytes != 8<<20 || *v.AvailableBytes > 8<<20-ram {
		t.Errorf("emptyDir ram = %+v, want its 8 MiB tmpfs holding at least %d", v, ram)
	}
	if ctr.Rootfs == nil || *ctr.Rootfs.UsedBytes < layer || ctr.Rootfs.CapacityBytes == nil {
		t.Fatalf("rootfs = %+v, want at least %d bytes", ctr.Rootfs, layer)
	}
	if ctr.Logs == nil || *ctr.Logs.InodesUsed < 1 {
		t.Fatalf("logs = %+v", ctr.Logs)
	}
	e := ps.EphemeralStorage
	want := *vols["scratch"].UsedBytes + *ctr.Rootfs.UsedBytes + *ctr.Logs.UsedBytes
	if e == nil || *e.UsedBytes < want || *e.UsedBytes >= want+ram || *e.CapacityBytes != *sum.Node.Fs.CapacityBytes {
		t.Errorf("ephemeral storage = %+v, want the emptyDir, writable layer and logs (%d bytes) without the tmpfs", e, want)
	}
	if sum.Node.Runtime == nil || sum.Node.Runtime.ImageFs == nil || *sum.Node.Runtime.ImageFs.UsedBytes < layer ||
		sum.Node.Runtime.ImageFs.CapacityBytes == nil {
		t.Errorf("node runtime = %+v, want the image filesystem", sum.Node.Runtime)
	}
}
