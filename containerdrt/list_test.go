package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/logs"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// startRunning creates n running containers of one host-network pod, their output
// discarded (the benchmark measures listing, not logging).
func (r *testRuntime) startRunning(tb testing.TB, n int) {
	tb.Helper()
	var containers []string
	for i := range n {
		containers = append(containers, fmt.Sprintf("  - {name: c%d, image: %s, command: [sleep, \"3600\"]}", i, testImage))
	}
	pod := loadPod(tb, "apiVersion: v1\nkind: Pod\nmetadata: {name: many}\nspec:\n  hostNetwork: true\n  containers:\n"+strings.Join(containers, "\n")+"\n")
	img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: testImage, Policy: "IfNotPresent"})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		created, err := r.create(runner.CreateRequest{Pod: pod, Container: c, Hash: manifests.ContainerHash(c), Image: img})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			ctx := context.WithoutCancel(r.ctx)
			r.StopContainer(ctx, created.ID, 0)
			r.RemoveContainer(ctx, created.ID)
		})
		cont, err := r.client.ContainerService().Get(r.ctx, created.ID)
		if err != nil {
			tb.Fatal(err)
		}
		if err := r.startTask(r.ctx, cont, cio.NullIO); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(func() { r.RemovePodData(context.WithoutCancel(r.ctx), pod.UID) })
}

// BenchmarkList measures List, the PLEG's one call, at 10, 100 and 200 running
// containers, next to the floor of listing them one round trip per container (what a
// runtime that inspects each container does).
func BenchmarkList(b *testing.B) {
	for _, n := range []int{10, 100, 200} {
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			r := newTestRuntime(b)
			r.startRunning(b, n)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 10*time.Minute)
			defer cancel()
			var perContainer time.Duration
			{
				start := time.Now()
				all, err := r.client.Containers(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for _, c := range all {
					if _, err := c.Info(ctx); err != nil {
						b.Fatal(err)
					}
					if t, err := c.Task(ctx, nil); err == nil {
						t.Status(ctx)
					}
				}
				perContainer = time.Since(start)
			}
			b.ResetTimer()
			for b.Loop() {
				got, err := r.List(ctx)
				if err != nil || len(got) != n {
					b.Fatalf("List = %d containers, %v; want %d", len(got), err, n)
				}
			}
			b.StopTimer()
			listNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(float64(perContainer.Nanoseconds()), "ns/one-call-per-container")
			b.ReportMetric(float64(perContainer.Nanoseconds())/listNs, "x-faster-than-per-container")
		})
	}
}

// TestGarbageOfOldAttempts runs a container three times and removes what
// runner.Garbage picks: only the newest attempt stays, with its snapshot.
func TestGarbageOfOldAttempts(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: gc}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [\"true\"]}\n")
	c := &pod.Spec.Containers[0]
	img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: testImage, Policy: "IfNotPresent"})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := range 3 {
		created, err := r.create(runner.CreateRequest{Pod: pod, Container: c, Attempt: attempt, Hash: manifests.ContainerHash(c), Image: img})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.RemoveContainer(context.WithoutCancel(r.ctx), created.ID) })
		if err := r.StartContainer(r.ctx, created.ID); err != nil {
			t.Fatal(err)
		}
		r.awaitState(t, created.ID, runner.StateExited)
	}
	t.Cleanup(func() { r.RemovePodData(context.WithoutCancel(r.ctx), pod.UID) })
	all, err := r.List(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range runner.Garbage(all, map[types.UID]bool{pod.UID: true}) {
		if err := r.RemoveContainer(r.ctx, g.ID); err != nil {
			t.Fatal(err)
		}
	}
	left, err := r.List(r.ctx)
	if err != nil || len(left) != 1 || left[0].Attempt != 2 {
		t.Fatalf("after garbage collection: %+v, %v; want only attempt 2", left, err)
	}
	var snaps []string
	r.client.SnapshotService("").Walk(r.ctx, func(_ context.Context, i snapshots.Info) error {
		if i.Kind == snapshots.KindActive {
			snaps = append(snaps, i.Name)
		}
		return nil
	})
	if len(snaps) != 1 || !strings.HasSuffix(snaps[0], left[0].ID) {
		t.Errorf("active snapshots = %v, want only %s's", snaps, left[0].ID)
	}
	for _, old := range []int{0, 1} {
		path := logs.ContainerPath(r.cfg.PodLogDir, pod.Namespace, pod.Name, string(pod.UID), "c", old)
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("log of collected attempt %d still there: %v", old, err)
		}
	}
}

// TestRemoveContainerRefusesARunningOne: a container whose task was created and never
// started is removed, task and all; one whose process runs is refused and left running
// (the runner removes a container it saw never started, which a start sent by a staticpod
// killed a moment before may have started since), and removed once stopped.
func TestRemoveContainerRefusesARunningOne(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: late}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	c := &pod.Spec.Containers[0]
	img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: testImage, Policy: "IfNotPresent"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.RemovePodData(context.WithoutCancel(r.ctx), pod.UID) })
	unstarted, err := r.create(runner.CreateRequest{Pod: pod, Container: c, Hash: manifests.ContainerHash(c), Image: img})
	if err != nil {
		t.Fatal(err)
	}
	cont, err := r.client.ContainerService().Get(r.ctx, unstarted.ID)
	if err != nil {
		t.Fatal(err)
	}
	io, err := r.newTask(r.ctx, cont, cio.NullIO) // created, as a start cut short leaves it
	if err != nil {
		t.Fatal(err)
	}
	io.Close()
	if got := r.awaitState(t, unstarted.ID, runner.StateCreated); got.PID == 0 {
		t.Fatalf("the task of the unstarted container has no process: %+v", got)
	}
	if err := r.RemoveContainer(r.ctx, unstarted.ID); err != nil {
		t.Fatalf("RemoveContainer of a container never started: %v", err)
	}
	if got, ok := r.find(t, unstarted.ID); ok {
		t.Fatalf("the container never started is still there: %+v", got)
	}

	running, err := r.create(runner.CreateRequest{Pod: pod, Container: c, Attempt: 1, Hash: manifests.ContainerHash(c), Image: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mustRemove(t, running.ID) })
	if err := r.StartContainer(r.ctx, running.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveContainer(r.ctx, running.ID); !errors.Is(err, errStartedSince) {
		t.Fatalf("RemoveContainer of a running container = %v, want %v", err, errStartedSince)
	}
	if got, _ := r.find(t, running.ID); got.State != runner.StateRunning {
		t.Fatalf("after the refused removal the container is %s, want running", got.State)
	}
}
