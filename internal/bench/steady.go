package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/staticpod/staticpod/containerdrt"
)

// steady measures the daemon at rest with 0, 20 and 100 pods (CPU and RSS; its PSS is
// the footprint's, measured when no other staticpod runs), one relist at 10, 100 and
// 200 containers, and a cold start with 100 running pods.
func (r *Run) steady(ctx context.Context, n *Node) error {
	observer, err := containerdrt.New(namespaces.WithNamespace(ctx, n.Name), containerdrt.Config{
		Address: r.d.Address, Namespace: n.Name, RootDir: filepath.Join(r.opts.Dir, "observer"),
		PodLogDir: filepath.Join(r.opts.Dir, "observer-logs"), Self: r.opts.Binary, Observe: true,
	})
	if err != nil {
		return err
	}
	defer observer.Close()
	written := 0
	for _, step := range []struct {
		pods         int
		idle, relist bool
	}{{0, true, false}, {5, false, true}, {20, true, false}, {50, false, true}, {100, true, true}} {
		if _, err := r.writePods(ctx, n, written, step.pods); err != nil {
			return err
		}
		written = step.pods
		if step.relist {
			r.Report.Add(relistRows(ctx, observer, 2*step.pods)...)
		}
		if step.idle {
			rows, err := r.idle(n, step.pods)
			if err != nil {
				return err
			}
			r.Report.Add(rows...)
		}
	}
	return r.coldStart(ctx, n, 100)
}

// idle samples the daemon's CPU and RSS over the idle window, in six slices. Its PSS is
// not taken here: the back-off chain's daemon runs beside it, and PSS would split the
// binary's pages between the two.
func (r *Run) idle(n *Node, pods int) ([]Row, error) {
	time.Sleep(3 * time.Second) // the last pod's sync and status settle
	slice := r.opts.Idle / 6
	var cpu, rss []float64
	for range 6 {
		before, err := CPUTicks(n.PID())
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		time.Sleep(slice)
		after, err := CPUTicks(n.PID())
		if err != nil {
			return nil, err
		}
		cpu = append(cpu, 100*float64(after-before)/ticksPerSecond/time.Since(t0).Seconds())
		if kib, ok := RSS(n.PID()); ok {
			rss = append(rss, mib(kib))
		}
	}
	if r.opts.Profile != "" && pods == 100 {
		// Where an idle daemon's time goes (its relists, repairs and status), and what it
		// allocates meanwhile: go tool pprof -base idle-100-allocs-before.pprof
		// idle-100-allocs-after.pprof.
		ctx, sock := context.Background(), n.path("staticpod.sock")
		if err := saveProfile(ctx, sock, "allocs", filepath.Join(r.opts.Profile, "idle-100-allocs-before.pprof")); err != nil {
			return nil, err
		}
		if err := profileCPU(ctx, sock, r.opts.Idle/2, filepath.Join(r.opts.Profile, "idle-100-staticpod.pprof")); err != nil {
			return nil, err
		}
		if err := saveProfile(ctx, sock, "allocs", filepath.Join(r.opts.Profile, "idle-100-allocs-after.pprof")); err != nil {
			return nil, err
		}
	}
	id := fmt.Sprintf("idle/pods=%d", pods)
	what := fmt.Sprintf("idle with %d pods over %s", pods, r.opts.Idle)
	cpuRow := NewRow(id+"/cpu", what+": daemon CPU, % of a core", "%", cpu)
	switch pods {
	case 20:
		cpuRow = cpuRow.Want(Target{Max: 0.3})
	case 100:
		cpuRow = cpuRow.Want(Target{Max: 1.0})
	}
	return []Row{cpuRow,
		NewRow(id+"/rss", what+": daemon RSS", "MiB", rss),
	}, nil
}

// relistRows times containerdrt's List, which every relist calls, and counts its
// allocations, at count containers.
func relistRows(ctx context.Context, rt *containerdrt.Runtime, count int) []Row {
	var took, allocs, bytes []float64
	for range 20 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		list, err := rt.List(ctx)
		d := time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil || len(list) != count {
			continue
		}
		took = append(took, ms(d))
		allocs = append(allocs, float64(after.Mallocs-before.Mallocs))
		bytes = append(bytes, float64(after.TotalAlloc-before.TotalAlloc)/1024)
	}
	id := fmt.Sprintf("relist/containers=%d", count)
	what := fmt.Sprintf("one relist of %d containers", count)
	return []Row{
		NewRow(id+"/time", what, "ms", took),
		NewRow(id+"/allocs", what+": allocations", "allocs", allocs),
		NewRow(id+"/bytes", what+": bytes allocated", "KiB", bytes),
	}
}

// coldStart stops the daemon with pods running and starts it again: the time from its
// exec until its API shows every pod running, with no container restarted.
func (r *Run) coldStart(ctx context.Context, n *Node, pods int) error {
	var samples []float64
	restarted := 0
	for range r.repeats(3) {
		if err := n.Stop(); err != nil {
			return err
		}
		mark := r.events.Mark()
		if err := n.Start(); err != nil {
			return err
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if list, err := n.Pods(ctx); err == nil && allRunning(list, pods) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("cold start: %d pods not all running after 2 min", pods)
			}
			time.Sleep(10 * time.Millisecond)
		}
		samples = append(samples, ms(time.Since(n.Started)))
		time.Sleep(2 * time.Second) // a restart would show by now
		for _, ev := range r.events.Since(mark) {
			if ev.Namespace == n.Name && (ev.Topic == "/tasks/start" || ev.Topic == "/tasks/exit") {
				restarted++
			}
		}
	}
	row := NewRow(fmt.Sprintf("cold/pods=%d", pods), fmt.Sprintf("staticpod restarted with %d pods running → all adopted and reported running (API polled every 10 ms)", pods), "ms", samples).
		Noted("%d task starts or exits meanwhile", restarted)
	if restarted > 0 {
		met := false
		row.Met = &met
	}
	r.Report.Add(row)
	return n.Clear(ctx)
}
