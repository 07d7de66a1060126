package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// BenchmarkManifestToRunning measures what a user waits for: from writing manifests
// into the watched directory to every container running, for 1 and 20 host-network
// pods. Next to it, in the same run, the floor: the same containers created and
// started directly through the containerd client, one after the other, with nothing
// else (no image check, no log writer, no status). The ratio is reported as x-floor.
func BenchmarkManifestToRunning(b *testing.B) {
	for _, pods := range []int{1, 20} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			n := newNode(b)
			floor := n.floor(pods)
			n.start()
			round := 0
			b.ResetTimer()
			for b.Loop() {
				round++
				for i := range pods {
					name := fmt.Sprintf("p%d-r%d", i, round)
					n.write(name+".yaml", podManifest(name, "Always", "sleep 3600", "  hostNetwork: true\n"))
				}
				n.awaitCount(pods, runner.StateRunning)
				b.StopTimer()
				n.clear()
				b.StartTimer()
			}
			b.StopTimer()
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(float64(floor.Nanoseconds()), "ns/floor")
			b.ReportMetric(per/float64(floor.Nanoseconds()), "x-floor")
		})
	}
}

// floor creates and starts pods containers straight through the client, as fast as
// it can, and returns how long that took; it removes them again.
func (n *node) floor(pods int) time.Duration {
	n.t.Helper()
	c := n.d.Client
	img, err := c.GetImage(n.ctx, e2eImage)
	if err != nil {
		n.t.Fatal(err)
	}
	var made []client.Container
	start := time.Now()
	for i := range pods {
		id := fmt.Sprintf("floor-%d", i)
		cont, err := c.NewContainer(n.ctx, id, client.WithImage(img), client.WithNewSnapshot(id, img),
			client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs("sleep", "3600"), oci.WithHostNamespace(specs.NetworkNamespace)))
		if err != nil {
			n.t.Fatal(err)
		}
		made = append(made, cont)
		task, err := cont.NewTask(n.ctx, cio.NullIO)
		if err != nil {
			n.t.Fatal(err)
		}
		if err := task.Start(n.ctx); err != nil {
			n.t.Fatal(err)
		}
	}
	took := time.Since(start)
	for _, cont := range made {
		if task, err := cont.Task(n.ctx, nil); err == nil {
			task.Delete(n.ctx, client.WithProcessKill)
		}
		cont.Delete(n.ctx, client.WithSnapshotCleanup)
	}
	return took
}

// awaitCount polls until count containers are in state. It is the benchmark's clock,
// so it polls every 5 ms, where testenv.Await's 20 ms would be part of what it measures.
func (n *node) awaitCount(count int, state runner.State) {
	n.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		all, err := n.rt.List(n.ctx)
		if err != nil {
			n.t.Fatal(err)
		}
		got := 0
		for _, c := range all {
			if c.Kind == runner.KindContainer && c.State == state {
				got++
			}
		}
		if got == count {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%d of %d containers %s after 2 min", got, count, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// clear removes every manifest and waits until no container is left.
func (n *node) clear() {
	n.t.Helper()
	entries, _ := os.ReadDir(n.manifests)
	for _, e := range entries {
		os.Remove(filepath.Join(n.manifests, e.Name()))
	}
	testenv.Await(n.t, "every pod removed", 2*time.Minute, func() bool {
		all, err := n.rt.List(n.ctx)
		return err == nil && len(all) == 0
	})
}
