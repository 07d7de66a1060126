package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// footprintPods are the pod counts the footprint is measured at; the floor has as many
// containers as the first that is not 0.
var footprintPods = []int{0, 20, 100}

// footprint measures the memory of staticpod's processes the way a user measures it
// on a node where staticpod runs alone: a daemon started with its defaults, the pods
// on the default pod network (--cni-default-bridge, as `make run` starts it), each
// with one container and its own network; Idle (60 s) after the last pod started, the
// PSS from /proc/<pid>/smaps_rollup of the daemon, the shims of its namespace, and
// their sandbox and log-writer children (see Classify).
//
// It runs after every other step, when no other staticpod does: PSS splits a page
// among the processes that map it, so a second daemon running the same binary takes
// half of the binary's pages off the first one's figure, and other shims and log
// writers take a share of theirs. Each row notes the processes outside the set that
// run the same binaries while it is measured (other containerds' shims, on a shared
// machine).
//
// The floor is measured the same way in the same run: the shims of as many
// client-started containers, Idle after they started, with no other shim of the run
// beside them; they run while the daemon waits with no pods, whose PSS shares none of
// their pages.
func (r *Run) footprint(ctx context.Context) error {
	n, err := r.node(ctx, "footprint",
		"--cni-conf-dir", filepath.Join(r.opts.Dir, "footprint", "net.d"), "--cni-default-bridge")
	if err != nil {
		return err
	}
	if err := n.Start(); err != nil {
		return err
	}
	defer n.Stop()
	floorCount := footprintPods[1]
	floorStarted, err := r.floor.StartIdle(ctx, floorCount)
	if err != nil {
		r.floor.Remove(ctx)
		return fmt.Errorf("floor: %w", err)
	}
	sleepUntil(n.Started.Add(r.opts.Idle))
	sleepUntil(floorStarted.Add(r.opts.Idle))
	floor, err := Measure(0, r.d.Address, r.floor.ns)
	if err != nil {
		r.floor.Remove(ctx)
		return err
	}
	samples := r.sampleFootprint(n)
	r.floor.Remove(ctx)
	floorShims := mib(floor.Shims.KiB)
	r.opts.Logf("footprint: the floor's %d shims: %.1f MiB PSS (%d other processes ran the shim's binary)", floor.Shims.Procs, floorShims, floor.Sharers)
	r.Report.Add(footprintRows(0, r.opts.Idle, samples, 0, 0)...)
	written := 0
	for _, pods := range footprintPods[1:] {
		last, err := r.writePods(ctx, n, written, pods)
		if err != nil {
			return fmt.Errorf("%w (staticpod's log:\n%s)", err, n.LogTail())
		}
		written = pods
		sleepUntil(last.Add(r.opts.Idle))
		samples := r.sampleFootprint(n)
		if pods == floorCount {
			r.Report.Add(footprintRows(pods, r.opts.Idle, samples, floorShims, floor.Sharers)...)
		} else {
			r.Report.Add(footprintRows(pods, r.opts.Idle, samples, 0, 0)...)
		}
	}
	return n.Clear(ctx)
}

// writePods writes the manifests of the idle pods from..to-1 and waits until each
// runs; it returns the time of the last one's start event.
func (r *Run) writePods(ctx context.Context, n *Node, from, to int) (time.Time, error) {
	mark := r.events.Mark()
	for i := from; i < to; i++ {
		name := fmt.Sprintf("idle%d", i)
		if err := n.Write(name+".yaml", Pod(name, Stopper, false)); err != nil {
			return time.Time{}, err
		}
	}
	started, err := r.events.Await(mark, to-from, 3*time.Minute, In(n.Name, "/tasks/start"))
	if err != nil {
		return time.Time{}, err
	}
	return Last(started), n.AwaitContainers(ctx, 2*to, time.Minute) // each with its sandbox
}

// sampleFootprint measures n's footprint three times, half a second apart.
func (r *Run) sampleFootprint(n *Node) []Footprint {
	var samples []Footprint
	for i := range r.repeats(3) {
		if i > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		if fp, err := Measure(n.PID(), r.d.Address, n.Name); err == nil {
			samples = append(samples, fp)
		}
	}
	return samples
}

// footprintRows are the rows of the footprint with pods running, measured idle after
// the last one started: one per kind (the daemon alone at 0 pods), and the total, against the floor (the daemon and floorShims MiB of the floor's shims)
// when floorShims is not 0. floorSharers is how many processes ran the floor's shim
// binary beside it.
func footprintRows(pods int, idle time.Duration, samples []Footprint, floorShims float64, floorSharers int) []Row {
	var rows []Row
	for _, k := range Kinds {
		if pods == 0 && k != KindDaemon {
			continue
		}
		var v []float64
		var last Usage
		for _, s := range samples {
			last = *s.Of(k)
			v = append(v, mib(last.KiB))
		}
		row := NewRow(fmt.Sprintf("footprint/net=bridge/pods=%d/%s", pods, k), fmt.Sprintf("%d pods: %s, PSS", pods, k), "MiB", v).
			Noted("%d process%s", last.Procs, map[bool]string{true: "", false: "es"}[last.Procs == 1])
		if k == KindDaemon {
			row = row.Noted("%.1f MiB of it the binary's pages, %.1f MiB anonymous", mib(last.File), mib(last.Anon))
		}
		rows = append(rows, row)
	}
	if pods == 0 {
		return rows
	}
	var total, daemon []float64
	sharers := 0
	for _, s := range samples {
		total = append(total, mib(s.Total()))
		daemon = append(daemon, mib(s.Daemon.KiB))
		sharers = max(sharers, s.Sharers)
	}
	row := NewRow(fmt.Sprintf("footprint/net=bridge/pods=%d/total", pods),
		fmt.Sprintf("%d idle pods of one container, own network (default bridge), %s after the last started: staticpod's processes in all (daemon, shims, sandboxes, log writers), PSS", pods, idle),
		"MiB", total)
	if sharers > 0 {
		row = row.Noted("%d other processes ran the same binaries, which lowers the figure", sharers)
	}
	if floorShims > 0 {
		what := "the daemon + the shims of as many client-started containers, measured the same way"
		if floorSharers > 0 {
			what += fmt.Sprintf("; %d other processes ran the shim's binary", floorSharers)
		}
		row = row.Against(what, []float64{Median(daemon) + floorShims}).Want(Target{Max: 100})
	}
	return append(rows, row)
}

// sleepUntil sleeps until t: the footprint is read at a given age of the processes.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }
