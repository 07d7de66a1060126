package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// network is how a benchmark's pods are networked.
type network struct {
	name     string // in the benchmark's name: net=host, net=pod or net=cni
	host     bool   // hostNetwork; otherwise the pod has a network namespace of its own
	cni      bool   // the pod's namespace gets a pod network (the default bridge's, on a test network)
	manifest string // what podManifest adds to the pod's spec
}

var networks = []network{
	{name: "net=host", host: true, manifest: "  hostNetwork: true\n"},
	{name: "net=pod"},
	{name: "net=cni", cni: true},
}

// benchNode is a node for a benchmark of pods networked as net, and the flags its
// staticpod needs for that.
func benchNode(b *testing.B, net network) (*node, []string) {
	if !net.cni {
		return newNode(b), nil
	}
	n, cn := newCNINode(b, bridgeConf)
	return n, cniFlags(cn)
}

// BenchmarkManifestToRunning measures what a user waits for: from writing manifests
// into the watched directory to every container running, for 1 and 20 pods on the host
// network (net=host), with a network namespace of their own (net=pod), and with a pod
// network in it (net=cni: the default bridge configuration, set up by the CNI plugins);
// ns/median is the median round, beside ns/op's mean. Next to it, in
// the same run, two floors: the same containers created and started directly through
// the containerd client, one after the other, with nothing else (no image check, no log
// writer, no status), reported as x-floor; and the same containers started by
// `ctr run -d`, one command each, reported as x-ctr (left out where ctr is not
// installed). Each floor is the median of five tries. The clock stops at containerd's event of the last task's
// start.
func BenchmarkManifestToRunning(b *testing.B) {
	for _, net := range networks {
		for _, pods := range []int{1, 20} {
			b.Run(fmt.Sprintf("%s/pods=%d", net.name, pods), func(b *testing.B) {
				n, flags := benchNode(b, net)
				floor := medianOf(floorRepeats, func() time.Duration {
					defer n.remove("floor", pods)
					return n.startRaw("floor", pods, net.host)
				})
				_, ctrErr := exec.LookPath("ctr")
				var viaCtr time.Duration
				if ctrErr == nil {
					viaCtr = medianOf(floorRepeats, func() time.Duration {
						defer n.remove("ctr", pods)
						return n.startCtr("ctr", pods, net.host)
					})
				} else {
					b.Logf("no x-ctr: %v", ctrErr)
				}
				n.start(flags...)
				round := 0
				var rounds []time.Duration
				b.ResetTimer()
				for b.Loop() {
					round++
					started := n.taskStarts()
					start := time.Now()
					for i := range pods {
						name := fmt.Sprintf("p%d-r%d", i, round)
						n.write(name+".yaml", podManifest(name, "Always", "sleep 3600", net.manifest))
					}
					started(pods)
					rounds = append(rounds, time.Since(start))
					b.StopTimer()
					n.awaitCount(pods, runner.StateRunning)
					n.clear()
					b.StartTimer()
				}
				b.StopTimer()
				per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				slices.Sort(rounds)
				b.ReportMetric(float64(rounds[len(rounds)/2].Nanoseconds()), "ns/median")
				b.ReportMetric(float64(floor.Nanoseconds()), "ns/floor")
				b.ReportMetric(per/float64(floor.Nanoseconds()), "x-floor")
				if ctrErr == nil {
					b.ReportMetric(float64(viaCtr.Nanoseconds()), "ns/ctr")
					b.ReportMetric(per/float64(viaCtr.Nanoseconds()), "x-ctr")
				}
			})
		}
	}
}

// BenchmarkContainerRestart measures how long a pod takes to run its container again
// after the container's process was killed (restartPolicy Always restarts at once the
// first time), and counts the shims that the restart started (shims-new, per restart).
// The containers of a pod with a network of its own share one shim, which the restart
// keeps; a host-network pod has a shim per container, so each restart starts one.
func BenchmarkContainerRestart(b *testing.B) {
	for _, net := range networks {
		b.Run(net.name, func(b *testing.B) {
			n, flags := benchNode(b, net)
			n.start(flags...)
			newShims := 0
			round := 0
			for b.Loop() {
				b.StopTimer()
				round++
				name := fmt.Sprintf("r%d", round)
				n.write(name+".yaml", podManifest(name, "Always", "sleep 3600", net.manifest))
				key := name + "-" + e2eNode + "/main/"
				first := n.awaitQuickly(running(key + "0"))[key+"0"]
				before := n.shimPIDs()
				b.StartTimer()
				if err := syscall.Kill(int(first.PID), syscall.SIGKILL); err != nil {
					b.Fatalf("kill %s: %v", first.ID, err)
				}
				n.awaitQuickly(running(key + "1"))
				b.StopTimer()
				for pid := range n.shimPIDs() {
					if !before[pid] {
						newShims++
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(newShims)/float64(b.N), "shims-new")
		})
	}
}

// startRaw creates and starts count containers named prefix-0, prefix-1... straight
// through the client, one after the other, as fast as it can, with nothing else, and
// returns how long that took. Each runs `sleep 3600` in its own network namespace, or
// in the host's if hostNet.
func (n *node) startRaw(prefix string, count int, hostNet bool) time.Duration {
	n.t.Helper()
	c := n.d.Client
	img, err := c.GetImage(n.ctx, e2eImage)
	if err != nil {
		n.t.Fatal(err)
	}
	opts := []oci.SpecOpts{oci.WithImageConfig(img), oci.WithProcessArgs("sleep", "3600")}
	if hostNet {
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace))
	}
	start := time.Now()
	for i := range count {
		id := fmt.Sprintf("%s-%d", prefix, i)
		cont, err := c.NewContainer(n.ctx, id, client.WithImage(img), client.WithNewSnapshot(id, img), client.WithNewSpec(opts...))
		if err != nil {
			n.t.Fatal(err)
		}
		task, err := cont.NewTask(n.ctx, cio.NullIO)
		if err != nil {
			n.t.Fatal(err)
		}
		if err := task.Start(n.ctx); err != nil {
			n.t.Fatal(err)
		}
	}
	return time.Since(start)
}

// startCtr does what startRaw does with `ctr run -d`, one command per container, and
// returns how long that took.
func (n *node) startCtr(prefix string, count int, hostNet bool) time.Duration {
	n.t.Helper()
	start := time.Now()
	for i := range count {
		args := []string{"-a", n.d.Address, "-n", n.ns, "run", "-d", "--fifo-dir", n.d.FIFODir()}
		if hostNet {
			args = append(args, "--net-host")
		}
		args = append(args, e2eImage, fmt.Sprintf("%s-%d", prefix, i), "sleep", "3600")
		if out, err := exec.Command("ctr", args...).CombinedOutput(); err != nil {
			n.t.Fatalf("ctr %v: %v\n%s", args, err, out)
		}
	}
	return time.Since(start)
}

// remove deletes what startRaw or startCtr started as prefix-0..count-1: the tasks, the
// containers and their snapshots. A container that was never made is skipped.
func (n *node) remove(prefix string, count int) {
	n.t.Helper()
	for i := range count {
		cont, err := n.d.Client.LoadContainer(n.ctx, fmt.Sprintf("%s-%d", prefix, i))
		if err != nil {
			continue
		}
		if task, err := cont.Task(n.ctx, nil); err == nil {
			if _, err := task.Delete(n.ctx, client.WithProcessKill); err != nil {
				n.t.Fatalf("delete task %s: %v", cont.ID(), err)
			}
		}
		if err := cont.Delete(n.ctx, client.WithSnapshotCleanup); err != nil {
			n.t.Fatalf("delete container %s: %v", cont.ID(), err)
		}
	}
}

// floorRepeats is how many times a floor is measured; its median is reported.
const floorRepeats = 5

// medianOf runs measure n times and returns the median.
func medianOf(n int, measure func() time.Duration) time.Duration {
	var all []time.Duration
	for range n {
		all = append(all, measure())
	}
	slices.Sort(all)
	return all[len(all)/2]
}

// taskStarts subscribes to the start events of the node's tasks and returns a wait for
// the count'th: the benchmarks' clock, which reads containerd's own record of each
// start, without polling anything that would compete with what it measures.
func (n *node) taskStarts() (await func(count int)) {
	n.t.Helper()
	ctx, cancel := context.WithCancel(n.ctx)
	events, errs := n.d.Client.Subscribe(ctx, fmt.Sprintf(`topic=="/tasks/start",namespace==%q`, n.ns))
	return func(count int) {
		n.t.Helper()
		defer cancel()
		timeout := time.After(2 * time.Minute)
		for seen := 0; seen < count; {
			select {
			case <-events:
				seen++
			case err := <-errs:
				n.t.Fatalf("task events: %v", err)
			case <-timeout:
				n.t.Fatalf("%d of %d tasks started after 2 min: %v", seen, count, summary(n.containers()))
			}
		}
	}
}

// awaitQuickly polls until cond holds for the node's containers and returns them. It is
// the benchmarks' clock, so it polls every 5 ms, where testenv.Await's 20 ms would be
// part of what it measures.
func (n *node) awaitQuickly(cond func(map[string]runner.Container) bool) map[string]runner.Container {
	n.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cs := n.containers()
		if cond(cs) {
			return cs
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("containers after 2 min: %v", summary(cs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitCount polls, as awaitQuickly does, until count containers are in state.
func (n *node) awaitCount(count int, state runner.State) {
	n.t.Helper()
	n.awaitQuickly(func(cs map[string]runner.Container) bool {
		got := 0
		for c := range maps.Values(cs) {
			if c.State == state {
				got++
			}
		}
		return got == count
	})
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
