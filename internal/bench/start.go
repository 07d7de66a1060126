package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
)

// starts measures manifests written → every container running, by containerd's start
// events: 1 pod against `ctr run -d`, 20 and 100 against the client starting as many
// containers all at once (the parallelism staticpod uses: a worker per pod).
//
// The client's burst is measured again right before each of staticpod's, and those
// bursts are the floor of the row (and of the later rows of fs that use it): a burst's
// time drifts with the machine by more than the rounds of one step differ, and the
// floors step ran minutes earlier.
func (r *Run) starts(ctx context.Context, n *Node, fs floorSet) error {
	type shape struct {
		net  string
		pods int
		reps int
	}
	for _, s := range []shape{{"host", 1, 7}, {"pod", 1, 7}, {"host", 20, 3}, {"pod", 20, 3}, {"pod", 100, 3}} {
		var samples []float64
		cpu, phases, paired := cpuSamples{}, floorSet{}, floorSet{}
		key := fmt.Sprintf("client/net=%s/n=%d/concurrent=", s.net, s.pods)
		for rep := range r.repeats(s.reps) {
			if s.pods > 1 {
				d, use, err := r.floor.Start(ctx, s.pods, s.net == "host", true)
				if err != nil {
					return err
				}
				paired.add(key+"true", d)
				paired.cpu(key+"true", use, s.pods)
				time.Sleep(settle) // its removal done: its shims gone before staticpod's burst is metered
			}
			b, err := r.burst(ctx, n, fmt.Sprintf("s%d", rep), s.pods, s.net == "host", "")
			if err != nil {
				return err
			}
			samples = append(samples, ms(b.took))
			if s.pods > 1 {
				cpu.add(b.cpu, s.pods)
			}
			for i, d := range b.phases {
				phases[phaseNames[i]] = append(phases[phaseNames[i]], ms(d))
			}
		}
		if r.opts.Profile != "" && s.pods == 100 {
			// One more burst, not counted: the profiler costs time of its own.
			if _, err := r.burst(ctx, n, "prof", s.pods, false, "start-100"); err != nil {
				return err
			}
		}
		id := fmt.Sprintf("start/net=%s/pods=%d", s.net, s.pods)
		work := fmt.Sprintf("%d manifest%s written → running, %s network", s.pods, plural(s.pods), netWord(s.net))
		row := NewRow(id, work, "ms", samples)
		if s.pods == 1 {
			row = row.Against("ctr run -d", fs["ctr/net="+s.net])
			want := 1.05
			if s.net == "pod" {
				want = 1.25
			}
			row = row.Want(Target{Ratio: true, Max: want}).
				Noted("%.2f× the client's create+start", row.Median/Median(fs["client/net="+s.net+"/n=1"]))
		} else {
			fs.replace(paired)
			want := 1.3
			if s.pods >= 100 {
				want = 1.2
			}
			row = row.Against("client, all at once", fs[key+"true"]).Want(Target{Ratio: true, Max: want})
			if seq := fs[key+"false"]; len(seq) > 0 {
				row = row.Noted("%.2f× the client one after the other", row.Median/Median(seq))
			}
		}
		r.Report.Add(row)
		if s.pods > 1 {
			r.Report.Add(cpuRow(s.net, s.pods, cpu, fs))
			if err := r.sameContainers(ctx, n, s.pods, s.net == "host", fs); err != nil {
				return err
			}
		}
		for i, name := range phaseNames {
			if len(phases[name]) > 0 && (i > 0 || s.net != "host") { // the host's network: no sandbox record
				r.Report.Add(NewRow(fmt.Sprintf("phase/net=%s/%s", s.net, name),
					fmt.Sprintf("1 manifest written → running, %s network, by containerd's events: %s", netWord(s.net), name), "ms", phases[name]))
			}
		}
	}
	return nil
}

// phaseNames are the steps of one pod's start as containerd sees them, each from the
// end of the one before (the first from the manifest's write): staticpod's watcher,
// loop, admission and the pod's host side up to its sandbox's record (no sandbox
// with the host's network: that step is then part of the next); the sandbox's pins,
// the image check, the container's host side, spec and snapshot up to its record; the
// shim, runc's create and the log writer up to the task; runc's start.
var phaseNames = []string{"to the sandbox's record", "to the container's record", "to its task", "to its start"}

// phasesOf splits a pod's start, from start, into phaseNames by the events of
// namespace ns: the container records made, the task created and started.
func phasesOf(events []Event, ns string, start time.Time) []time.Duration {
	var records []time.Time
	var task, started time.Time
	for _, e := range events {
		switch {
		case e.Namespace != ns:
		case e.Topic == "/containers/create":
			records = append(records, e.Time)
		case e.Topic == "/tasks/create":
			task = e.Time
		case e.Topic == "/tasks/start":
			started = e.Time
		}
	}
	if len(records) == 0 || task.IsZero() || started.IsZero() {
		return nil
	}
	sandbox := records[0]
	if len(records) == 1 {
		sandbox = start // no sandbox record
	}
	last := records[len(records)-1]
	return []time.Duration{sandbox.Sub(start), last.Sub(sandbox), task.Sub(last), started.Sub(task)}
}

// burstResult is what a burst measured.
type burstResult struct {
	took   time.Duration   // from the first write to the last start
	cpu    CPUUse          // for more than one pod
	phases []time.Duration // for one pod: see phaseNames
}

// burst writes pods manifests named <prefix>-<i> and returns the time from the first
// write to containerd's start event of the last container, and, for more than one pod,
// the CPU time spent up to settle after it. With profile set, it writes the CPU
// profiles of staticpod and containerd over the burst to <profile>-staticpod.pprof and
// <profile>-containerd.pprof in Options.Profile. It removes the pods after.
func (r *Run) burst(ctx context.Context, n *Node, prefix string, pods int, hostNet bool, profile string) (burstResult, error) {
	profiles := &errgroup.Group{}
	if profile != "" {
		profiles = startProfiles(ctx, r.opts.Profile, profile, map[string]string{"staticpod": n.path("staticpod.sock"), "containerd": r.d.DebugAddress()})
	}
	cpuMark, err := r.meter.Mark(r.d.PID())
	if err != nil {
		return burstResult{}, err
	}
	mark := r.events.Mark()
	start := time.Now()
	took, err := r.startPods(ctx, n, prefix, pods, hostNet)
	if err != nil {
		return burstResult{}, err
	}
	b := burstResult{took: took}
	if pods == 1 {
		b.phases = phasesOf(r.events.Since(mark), n.Name, start)
	} else {
		time.Sleep(settle)
		if b.cpu, err = r.meter.Since(cpuMark, r.d.PID()); err != nil {
			return burstResult{}, err
		}
	}
	if err := profiles.Wait(); err != nil {
		return burstResult{}, err
	}
	return b, n.Clear(ctx)
}

// cpuSamples are the CPU times per pod of bursts, in ms, by part (see CPUUse.Parts).
type cpuSamples map[string][]float64

func (c cpuSamples) add(u CPUUse, pods int) {
	for part, d := range u.Parts() {
		c[part] = append(c[part], ms(d)/float64(pods))
	}
}

// cpuRow is the CPU time per pod that starting pods at once cost staticpod against
// what the client's burst of as many containers cost, noted by who spent it.
func cpuRow(net string, pods int, cpu cpuSamples, fs floorSet) Row {
	floor := fs.cpuOf(fmt.Sprintf("client/net=%s/n=%d/concurrent=true", net, pods))
	med := func(c cpuSamples, part string) float64 { return Median(c[part]) }
	return NewRow(fmt.Sprintf("cpu/net=%s/pods=%d", net, pods),
		fmt.Sprintf("%d manifests written → running, %s network: CPU time per pod, every process", pods, netWord(net)),
		"ms", cpu["all"]).
		Against("client, all at once", floor["all"]).
		Want(Target{Ratio: true, Max: 1.3}).
		Noted("staticpod %.1f, containerd %.1f, shims and runc %.1f, log writers %.1f ms; the client's: client %.1f, containerd %.1f, shims and runc %.1f ms",
			med(cpu, "daemon"), med(cpu, "containerd"), med(cpu, "shims"), med(cpu, "loggers"),
			med(floor, "client"), med(floor, "containerd"), med(floor, "shims"))
}

// present measures staticpod started with 20 manifests in its directory → every
// container running, from the daemon's exec, against the client starting 20 bare
// containers at once in the same round (while staticpod is stopped, as starts pairs
// its bursts); and against the client starting the same containers again at once
// (Replay), beside them.
func (r *Run) present(ctx context.Context, n *Node) error {
	var samples, theirs, bare []float64
	for rep := range r.repeats(3) {
		time.Sleep(settle) // the last round's removals done: its shims and log writers gone
		if err := n.Stop(); err != nil {
			return err
		}
		d, _, err := r.floor.Start(ctx, 20, false, true)
		if err != nil {
			return err
		}
		bare = append(bare, ms(d))
		time.Sleep(settle)
		for i := range 20 {
			name := fmt.Sprintf("c%d-%d", rep, i)
			if err := n.Write(name+".yaml", Pod(name, Stopper, false)); err != nil {
				return err
			}
		}
		mark := r.events.Mark()
		if err := n.Start(); err != nil {
			return err
		}
		started, err := r.events.Await(mark, 20, 3*time.Minute, In(n.Name, "/tasks/start"))
		if err != nil {
			return err
		}
		samples = append(samples, ms(Last(started).Sub(n.Started)))
		time.Sleep(settle)
		took, _, err := r.replay.Replay(ctx, n.Name, filepath.Join(r.opts.Dir, "replay-logs"))
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		theirs = append(theirs, ms(took))
		if err := n.Clear(ctx); err != nil {
			return err
		}
	}
	r.Report.Add(NewRow("present/pods=20", "staticpod started with 20 manifests present → running (own network)", "ms", samples).
		Against("client, 20 at once", bare).
		Want(Target{Ratio: true, Max: 1.3}))
	r.Report.Add(NewRow("same-present/pods=20", "staticpod started with 20 manifests present → running (own network), against the same containers", "ms", samples).
		Against("client, the same containers at once", theirs).Want(Target{Ratio: true, Max: 1.3}).
		Noted("the client starts them beside staticpod's, which still run; its burst of the same containers is %.2f× its burst of bare ones", Median(theirs)/Median(bare)))
	return nil
}

// removals measures a manifest removed → its app exited on SIGTERM, and → its
// containers deleted, against the client stopping and deleting one container.
func (r *Run) removals(ctx context.Context, n *Node) error {
	for _, net := range []string{"host", "pod"} {
		var exited, gone []float64
		containers := 1
		if net == "pod" {
			containers = 2 // the sandbox too
		}
		for rep := range r.repeats(5) {
			name := fmt.Sprintf("rm%s%d", net, rep)
			mark := r.events.Mark()
			if err := n.Write(name+".yaml", Pod(name, Stopper, net == "host")); err != nil {
				return err
			}
			if _, err := r.events.Await(mark, 1, time.Minute, In(n.Name, "/tasks/start")); err != nil {
				return err
			}
			time.Sleep(300 * time.Millisecond) // the shell sets its trap; the pod is published
			mark = r.events.Mark()
			start := time.Now()
			if err := n.Remove(name + ".yaml"); err != nil {
				return err
			}
			exit, err := r.events.Await(mark, 1, time.Minute, In(n.Name, "/tasks/exit"))
			if err != nil {
				return err
			}
			deleted, err := r.events.Await(mark, containers, time.Minute, In(n.Name, "/containers/delete"))
			if err != nil {
				return err
			}
			exited = append(exited, ms(exit[0].Time.Sub(start)))
			gone = append(gone, ms(Last(deleted).Sub(start)))
		}
		floor, err := r.stopFloor(ctx, net == "host")
		if err != nil {
			return err
		}
		r.Report.Add(
			NewRow("remove/net="+net+"/exited", "manifest removed → app exited on SIGTERM, "+netWord(net)+" network", "ms", exited).
				Want(Target{Max: 20}),
			NewRow("remove/net="+net+"/gone", "manifest removed → containers deleted, "+netWord(net)+" network", "ms", gone).
				Against("client: kill, delete task and container", floor))
	}
	return nil
}

// stopFloor is the client stopping one container of the Stopper script: SIGTERM, the
// exit, the task's and the container's deletion, from the kill to containerd's
// deletion event.
func (r *Run) stopFloor(ctx context.Context, hostNet bool) ([]float64, error) {
	var samples []float64
	for range r.repeats(5) {
		d, err := r.floor.StartAndStop(ctx, hostNet)
		if err != nil {
			return nil, err
		}
		samples = append(samples, ms(d))
	}
	return samples, nil
}
