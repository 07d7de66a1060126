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

// steady measures the daemon at rest with 0, 20 and 100 pods (CPU, RSS, PSS, the
// footprint by kind), one relist at 10, 100 and 200 containers, and a cold start with
// 100 running pods.
func (r *Run) steady(ctx context.Context, n *Node, fs floorSet) error {
	observer, err := containerdrt.New(namespaces.WithNamespace(ctx, n.Name), containerdrt.Config{
		Address: r.d.Address, Namespace: n.Name, RootDir: filepath.Join(r.opts.Dir, "observer"),
		PodLogDir: filepath.Join(r.opts.Dir, "observer-logs"), Self: r.opts.Binary, Observe: true,
	})
	if err != nil {
		return err
	}
	defer observer.Close()
	written := 0
	grow := func(pods int) error {
		mark, before := r.events.Mark(), written
		for ; written < pods; written++ {
			name := fmt.Sprintf("idle%d", written)
			if err := n.Write(name+".yaml", Pod(name, Stopper, false)); err != nil {
				return err
			}
		}
		if _, err := r.events.Await(mark, pods-before, 3*time.Minute, In(n.Name, "/tasks/start")); err != nil {
			return err
		}
		return n.AwaitContainers(ctx, 2*pods, time.Minute) // each with its sandbox
	}
	for _, step := range []struct {
		pods          int
		idle, relist  bool
		footprint     bool
		floorShimsKey string
	}{{0, true, false, false, ""}, {5, false, true, false, ""}, {20, true, false, true, "shims/n=20"}, {50, false, true, false, ""}, {100, true, true, true, ""}} {
		if err := grow(step.pods); err != nil {
			return err
		}
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
		if step.footprint {
			r.Report.Add(r.footprint(n, step.pods, fs[step.floorShimsKey])...)
		}
	}
	return r.coldStart(ctx, n, 100)
}

// idle samples the daemon's CPU, RSS and PSS over the idle window, in six slices.
func (r *Run) idle(n *Node, pods int) ([]Row, error) {
	time.Sleep(3 * time.Second) // the last pod's sync and status settle
	slice := r.opts.Idle / 6
	var cpu, rss, pss []float64
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
		if kib, ok := PSS(n.PID()); ok {
			pss = append(pss, mib(kib))
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
		NewRow(id+"/pss", what+": daemon PSS", "MiB", pss),
	}, nil
}

// footprint measures the PSS of staticpod's processes by kind with pods running.
func (r *Run) footprint(n *Node, pods int, floorShims []float64) []Row {
	var samples []Footprint
	for range r.repeats(3) {
		fp, err := Measure(n.PID(), r.d.Address, n.Name)
		if err == nil {
			samples = append(samples, fp)
		}
		time.Sleep(500 * time.Millisecond)
	}
	kinds := []struct {
		name string
		of   func(Footprint) Usage
	}{
		{"daemon", func(f Footprint) Usage { return f.Daemon }},
		{"shims", func(f Footprint) Usage { return f.Shims }},
		{"pause", func(f Footprint) Usage { return f.Pause }},
		{"loggers", func(f Footprint) Usage { return f.Loggers }},
	}
	var rows []Row
	var total, daemon []float64
	for _, k := range kinds {
		var v []float64
		procs := 0
		for _, s := range samples {
			v = append(v, mib(k.of(s).KiB))
			procs = k.of(s).Procs
		}
		rows = append(rows, NewRow(fmt.Sprintf("footprint/pods=%d/%s", pods, k.name),
			fmt.Sprintf("%d pods: %s, PSS", pods, k.name), "MiB", v).Noted("%d processes", procs))
	}
	for _, s := range samples {
		total = append(total, mib(s.Total()))
		daemon = append(daemon, mib(s.Daemon.KiB))
	}
	row := NewRow(fmt.Sprintf("footprint/pods=%d/total", pods), fmt.Sprintf("%d pods: staticpod's processes in all, PSS", pods), "MiB", total)
	if len(floorShims) > 0 {
		row = row.Against("the daemon + the shims of as many client-started containers", []float64{Median(daemon) + floorShims[0]}).
			Want(Target{Max: 100})
	}
	return append(rows, row)
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
