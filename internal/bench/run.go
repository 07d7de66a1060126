package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"golang.org/x/sync/errgroup"

	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/internal/testenv"
)

// Options set what a run measures and where it works.
type Options struct {
	Binary string        // staticpod, built with its helper (make build)
	Dir    string        // scratch space: the nodes' directories
	Quick  bool          // fewer repeats and shorter idle windows: to try the program, not for figures
	Idle   time.Duration // how long each idle figure is taken over (60 s; 10 s when Quick)
	Logf   func(format string, args ...any)
	Flags  []string // given to every staticpod, after the nodes' own
	Only   string   // when set, run only the steps of that name: floors, start, present, removal, restart, steady
}

// runs reports whether step is to be run.
func (o Options) runs(step string) bool {
	return o.Only == "" || slices.Contains(strings.Split(o.Only, ","), step)
}

// Run is one run of every benchmark against one private containerd.
type Run struct {
	opts   Options
	d      *testenv.Daemon
	events *Events
	floor  *Floor
	Report Report
}

// relistPeriod is staticpod's default, which every node keeps.
const relistPeriod = time.Second

// New starts a private containerd for a run.
func New(ctx context.Context, opts Options) (*Run, error) {
	if opts.Idle == 0 {
		opts.Idle = 60 * time.Second
		if opts.Quick {
			opts.Idle = 10 * time.Second
		}
	}
	d, err := testenv.StartDaemon(ctx)
	if err != nil {
		return nil, err
	}
	r := &Run{opts: opts, d: d, events: Watch(ctx, d.Client)}
	r.floor, err = NewFloor(ctx, d, "floor", r.events)
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Close stops the containerd and everything that runs on it.
func (r *Run) Close() error {
	r.events.Close()
	ctx := context.Background()
	for _, ns := range []string{"floor", "bench", "restart", "relist-only"} {
		r.d.PurgeNamespace(ctx, ns)
	}
	return errors.Join(r.d.Stop(ctx), testenv.UnmountUnder(r.opts.Dir))
}

// repeats is how many samples a figure gets: n, or fewer when Quick.
func (r *Run) repeats(n int) int {
	if r.opts.Quick {
		return min(n, 2)
	}
	return n
}

func (r *Run) node(ctx context.Context, name string, flags ...string) (*Node, error) {
	return NewNode(ctx, r.d, r.opts.Dir, name, r.opts.Binary, append(flags, r.opts.Flags...)...)
}

// All runs every benchmark and fills the report.
func (r *Run) All(ctx context.Context) error {
	began := time.Now()
	r.describe(ctx)
	floors := floorSet{}
	if r.opts.runs("floors") || r.opts.runs("start") || r.opts.runs("present") {
		var err error
		if floors, err = r.floors(ctx); err != nil {
			return fmt.Errorf("floors: %w", err)
		}
	}
	main, err := r.node(ctx, "bench")
	if err != nil {
		return err
	}
	if err := main.Start(); err != nil {
		return err
	}
	defer main.Stop()
	steps := []struct {
		name string
		run  func() error
	}{
		{"start", func() error { return r.starts(ctx, main, floors) }},
		{"present", func() error { return r.present(ctx, main, floors) }},
		{"removal", func() error { return r.removals(ctx, main) }},
	}
	for _, s := range steps {
		if !r.opts.runs(s.name) {
			continue
		}
		r.opts.Logf("%s", s.name)
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w (staticpod's log:\n%s)", s.name, err, main.LogTail())
		}
	}
	// The restarts wait out back-offs of up to 80 s: they run on a node of their own
	// beside the idle measurements, which need the time anyway and whose daemon is
	// another process.
	var g errgroup.Group
	if r.opts.runs("restart") {
		r.opts.Logf("restart")
		chain, err := r.restarts(ctx)
		if err != nil {
			return fmt.Errorf("restarts: %w", err)
		}
		g.Go(chain)
	}
	if r.opts.runs("steady") {
		r.opts.Logf("idle, relist, footprint, cold start")
		if err := r.steady(ctx, main, floors); err != nil {
			g.Wait()
			return fmt.Errorf("steady: %w (staticpod's log:\n%s)", err, main.LogTail())
		}
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("restarts: %w", err)
	}
	r.Report.Duration = time.Since(began).Round(time.Second).String()
	return nil
}

// floorSet holds the floors' samples, in ms, by name.
type floorSet map[string][]float64

// floors measures what containerd costs alone: one container by `ctr run -d` and by
// the client; 20 and 100 by the client, one after the other and all at once.
func (r *Run) floors(ctx context.Context) (floorSet, error) {
	r.opts.Logf("floors")
	fs := floorSet{}
	for _, net := range []string{"host", "pod"} {
		host := net == "host"
		for range r.repeats(7) {
			d, err := r.floor.StartCtr(ctx, host)
			if err != nil {
				return nil, err
			}
			fs.add("ctr/net="+net, d)
			if d, err = r.floor.Start(ctx, 1, host, false); err != nil {
				return nil, err
			}
			fs.add("client/net="+net+"/n=1", d)
		}
		for range r.repeats(3) {
			for _, conc := range []bool{false, true} {
				d, err := r.floor.Start(ctx, 20, host, conc)
				if err != nil {
					return nil, err
				}
				fs.add(fmt.Sprintf("client/net=%s/n=20/concurrent=%t", net, conc), d)
			}
		}
	}
	for range r.repeats(2) {
		d, err := r.floor.Start(ctx, 100, false, true)
		if err != nil {
			return nil, err
		}
		fs.add("client/net=pod/n=100/concurrent=true", d)
	}
	shims, err := r.floor.Shims(ctx, 20)
	if err != nil {
		return nil, err
	}
	fs["shims/n=20"] = []float64{mib(shims.KiB)}
	return fs, nil
}

func (fs floorSet) add(key string, d time.Duration) { fs[key] = append(fs[key], ms(d)) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(kib int64) float64 { return float64(kib) / 1024 }

// starts measures manifests written → every container running, by containerd's start
// events: 1 pod against `ctr run -d`, 20 and 100 against the client starting as many
// containers all at once (the parallelism staticpod uses: a worker per pod).
func (r *Run) starts(ctx context.Context, n *Node, fs floorSet) error {
	type shape struct {
		net  string
		pods int
		reps int
	}
	for _, s := range []shape{{"host", 1, 7}, {"pod", 1, 7}, {"host", 20, 3}, {"pod", 20, 3}, {"pod", 100, 2}} {
		var samples []float64
		for rep := range r.repeats(s.reps) {
			mark := r.events.Mark()
			start := time.Now()
			for i := range s.pods {
				name := fmt.Sprintf("s%d-%d", rep, i)
				if err := n.Write(name+".yaml", Pod(name, Stopper, s.net == "host")); err != nil {
					return err
				}
			}
			started, err := r.events.Await(mark, s.pods, 3*time.Minute, In(n.Name, "/tasks/start"))
			if err != nil {
				return err
			}
			samples = append(samples, ms(Last(started).Sub(start)))
			if err := n.Clear(ctx); err != nil {
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
			key := fmt.Sprintf("client/net=%s/n=%d/concurrent=", s.net, s.pods)
			row = row.Against("client, all at once", fs[key+"true"]).Want(Target{Ratio: true, Max: 1.0})
			if seq := fs[key+"false"]; len(seq) > 0 {
				row = row.Noted("%.2f× the client one after the other", row.Median/Median(seq))
			}
		}
		r.Report.Add(row)
	}
	return nil
}

// present measures staticpod started with 20 manifests in its directory → every
// container running, from the daemon's exec.
func (r *Run) present(ctx context.Context, n *Node, fs floorSet) error {
	var samples []float64
	for rep := range r.repeats(3) {
		if err := n.Stop(); err != nil {
			return err
		}
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
		if err := n.Clear(ctx); err != nil {
			return err
		}
	}
	r.Report.Add(NewRow("present/pods=20", "staticpod started with 20 manifests present → running (own network)", "ms", samples).
		Against("client, 20 at once", fs["client/net=pod/n=20/concurrent=true"]).
		Want(Target{Max: 1300}))
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

// restarts measures a SIGKILLed container → running again: the first restart, which
// has no back-off, with the PLEG woken by containerd's exit event and without (the
// relist period alone). It returns the back-off chain, to be run beside the idle
// measurements (which need the time anyway, and whose daemon is another process): the
// back-offs of 10, 20, 40 and 80 s, measured as lateness past their expiry.
func (r *Run) restarts(ctx context.Context) (chain func() error, _ error) {
	woken, err := r.node(ctx, "restart")
	if err != nil {
		return nil, err
	}
	polled, err := r.node(ctx, "relist-only", "--pleg-exit-events=false")
	if err != nil {
		return nil, err
	}
	for _, n := range []*Node{woken, polled} {
		if err := n.Start(); err != nil {
			return nil, err
		}
	}
	for _, c := range []struct {
		n    *Node
		net  string
		mode string
		want float64
	}{{woken, "pod", "exit event", 100}, {woken, "host", "exit event", 100}, {polled, "pod", "relist only", ms(relistPeriod) + 100}} {
		var samples []float64
		for rep := range r.repeats(5) {
			name := fmt.Sprintf("first%s%d", c.net, rep)
			k, err := newKiller(r, c.n, name, c.net == "host")
			if err != nil {
				return nil, err
			}
			d, err := k.restart()
			if err != nil {
				return nil, err
			}
			samples = append(samples, ms(d))
			if err := c.n.Clear(ctx); err != nil {
				return nil, err
			}
		}
		r.Report.Add(NewRow(fmt.Sprintf("restart/first/net=%s/%s", c.net, strings.ReplaceAll(c.mode, " ", "-")),
			fmt.Sprintf("SIGKILL → running again, 1st restart (exit → start events), %s network, %s", netWord(c.net), c.mode), "ms", samples).
			Want(Target{Max: c.want}))
	}
	if err := polled.Stop(); err != nil {
		return nil, err
	}
	return func() error {
		defer woken.Stop()
		if err := r.backoffChain(woken); err != nil {
			return err
		}
		return woken.Clear(ctx)
	}, nil
}

// backoffChain runs three pods on n, each killed as soon as it runs again, so that its
// waits are 10, 20, 40 and 80 s, and measures how late each restart came.
func (r *Run) backoffChain(n *Node) error {
	backoffs := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second}
	late := make([][]float64, len(backoffs))
	var g errgroup.Group
	results := make([][]time.Duration, r.repeats(3))
	for i := range results {
		k, err := newKiller(r, n, fmt.Sprintf("chain%d", i), false)
		if err != nil {
			return err
		}
		time.Sleep(700 * time.Millisecond) // the pods' restarts do not coincide
		g.Go(func() error {
			if _, err := k.restart(); err != nil { // the first, at once
				return err
			}
			for _, b := range backoffs {
				d, err := k.restart()
				if err != nil {
					return err
				}
				results[i] = append(results[i], d-b)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, res := range results {
		for j, d := range res {
			late[j] = append(late[j], ms(d))
		}
	}
	for j, b := range backoffs {
		r.Report.Add(NewRow(fmt.Sprintf("restart/backoff=%s", b), fmt.Sprintf("restart after a %s back-off: time past its expiry", b), "ms", late[j]).
			Want(Target{Max: 200}))
	}
	return nil
}

// killer kills a pod's container and times its restart by containerd's events.
type killer struct {
	r      *Run
	n      *Node
	prefix string // of the pod's container IDs: "<pod name>-<node>_"
	pid    uint32 // of the running container
}

// newKiller writes the pod and waits for its container to run.
func newKiller(r *Run, n *Node, name string, hostNet bool) (*killer, error) {
	k := &killer{r: r, n: n, prefix: name + "-" + nodeName + "_"}
	mark := r.events.Mark()
	if err := n.Write(name+".yaml", Pod(name, Stopper, hostNet)); err != nil {
		return nil, err
	}
	start, err := r.events.Await(mark, 1, time.Minute, k.started)
	if err != nil {
		return nil, err
	}
	k.pid = start[0].PID
	return k, nil
}

// started matches the start of an attempt of the pod's container.
func (k *killer) started(ev Event) bool {
	return In(k.n.Name, "/tasks/start")(ev) && strings.HasPrefix(ev.Container, k.prefix)
}

// restart kills the container and returns the time from its exit to the start of the
// next attempt.
func (k *killer) restart() (time.Duration, error) {
	time.Sleep(200 * time.Millisecond) // the start is recorded and published
	mark := k.r.events.Mark()
	if err := syscall.Kill(int(k.pid), syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill %s: %w", k.prefix, err)
	}
	pid := k.pid
	exit, err := k.r.events.Await(mark, 1, time.Minute, func(ev Event) bool {
		return In(k.n.Name, "/tasks/exit")(ev) && ev.PID == pid
	})
	if err != nil {
		return 0, err
	}
	started, err := k.r.events.Await(mark, 1, 3*time.Minute, k.started)
	if err != nil {
		return 0, err
	}
	k.pid = started[0].PID
	return started[0].Time.Sub(exit[0].Time), nil
}

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

// describe records the machine and the versions.
func (r *Run) describe(ctx context.Context) {
	r.Report.Date = time.Now().UTC().Format("2006-01-02 15:04 UTC")
	r.Report.Machine = map[string]string{
		"cpus":   fmt.Sprint(runtime.NumCPU()),
		"cpu":    cpuModel(),
		"memory": memTotal(),
		"kernel": kernel(),
		"cgroup": cgroupMode(),
	}
	r.Report.Versions = map[string]string{"go": runtime.Version()}
	if v, err := r.d.Client.Version(ctx); err == nil {
		r.Report.Versions["containerd"] = v.Version
	}
	r.Report.Versions["runc"] = firstLine(command("runc", "--version"))
	r.Report.Versions["staticpod"] = firstLine(command(r.opts.Binary, "--version"))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func netWord(net string) string {
	if net == "host" {
		return "host"
	}
	return "own"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
