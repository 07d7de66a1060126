package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

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
	Only   string   // when set, run only the steps of that name: floors, start, present, removal, restart, steady, crun, footprint
	// Profile, when set, is a directory for CPU profiles of staticpod and containerd
	// over one more burst of 100 pods, not counted, of containerd over one more burst of
	// the client's (client-100-containerd.pprof), and of staticpod idle with 100 pods
	// (after the idle figures, over half the idle window).
	Profile string
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
	meter  *CPUMeter
	floor  *Floor
	replay *Floor // the client starting staticpod's own containers again: see Replay
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
	d, err := testenv.StartDaemonWith(ctx, testenv.DaemonOptions{LogLevel: "info", StateOnTmpfs: true}) // as a user runs it: see both
	if err != nil {
		return nil, err
	}
	r := &Run{opts: opts, d: d, events: Watch(ctx, d.Client)}
	if r.meter, err = NewCPUMeter(d.PID()); err != nil {
		r.Close()
		return nil, err
	}
	r.floor, err = NewFloor(ctx, d, "floor", r.events, r.meter)
	if err == nil {
		r.replay, err = NewFloor(ctx, d, "replay", r.events, r.meter)
	}
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
	for _, ns := range []string{"floor", "replay", "bench", "restart", "relist-only", "cni", "nocni", "crun", "footprint"} {
		r.d.PurgeNamespace(ctx, ns)
	}
	err := errors.Join(r.d.Stop(ctx), testenv.UnmountUnder(r.opts.Dir))
	if r.meter != nil {
		err = errors.Join(err, r.meter.Close())
	}
	return err
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
	if err := r.onMain(ctx, floors); err != nil {
		return err
	}
	if r.opts.runs("network") {
		r.opts.Logf("pod network")
		if err := r.podNetwork(ctx); err != nil {
			return fmt.Errorf("pod network: %w", err)
		}
	}
	if r.opts.runs("crun") {
		r.opts.Logf("crun")
		if err := r.handlers(ctx); err != nil {
			return fmt.Errorf("crun: %w", err)
		}
	}
	// Last, when no other staticpod runs: see footprint.
	if r.opts.runs("footprint") {
		r.opts.Logf("footprint")
		if err := r.footprint(ctx); err != nil {
			return fmt.Errorf("footprint: %w", err)
		}
	}
	r.Report.Duration = time.Since(began).Round(time.Second).String()
	return nil
}

// onMain runs the steps on the main node, and the restarts beside them on nodes of
// their own; every daemon has stopped when it returns.
func (r *Run) onMain(ctx context.Context, floors floorSet) error {
	if !slices.ContainsFunc([]string{"start", "present", "removal", "restart", "steady"}, r.opts.runs) {
		return nil
	}
	main, err := r.node(ctx, "bench")
	if err != nil {
		return err
	}
	if err := main.Start(); err != nil {
		return err
	}
	defer main.Stop()
	if err := r.meter.Enter(cpuDaemon, main.PID()); err != nil {
		return err
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"start", func() error { return r.starts(ctx, main, floors) }},
		{"present", func() error { return r.present(ctx, main) }},
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
		r.opts.Logf("idle, relist, cold start")
		if err := r.steady(ctx, main); err != nil {
			g.Wait()
			return fmt.Errorf("steady: %w (staticpod's log:\n%s)", err, main.LogTail())
		}
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("restarts: %w", err)
	}
	return nil
}

// floorSet holds the floors' samples, in ms, by name.
type floorSet map[string][]float64

// floors measures what containerd costs alone: one container by `ctr run -d` and by
// the client; 20 by the client one after the other. The client's bursts of 20 and
// 100 at once are measured by starts and present, each beside the burst it is the
// floor of; the footprint measures its floor itself.
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
			if d, _, err = r.floor.Start(ctx, 1, host, false); err != nil {
				return nil, err
			}
			fs.add("client/net="+net+"/n=1", d)
		}
		for range r.repeats(3) {
			d, _, err := r.floor.Start(ctx, 20, host, false)
			if err != nil {
				return nil, err
			}
			fs.add(fmt.Sprintf("client/net=%s/n=20/concurrent=false", net), d)
		}
	}
	if r.opts.Profile != "" {
		// One more burst, not counted: containerd's profile under the client, to set
		// beside its profile under staticpod's burst of as many pods.
		profiled := startProfiles(ctx, r.opts.Profile, "client-100", map[string]string{"containerd": r.d.DebugAddress()})
		if _, _, err := r.floor.Start(ctx, 100, false, true); err != nil {
			return nil, err
		}
		if err := profiled.Wait(); err != nil {
			return nil, err
		}
	}
	return fs, nil
}

func (fs floorSet) add(key string, d time.Duration) { fs[key] = append(fs[key], ms(d)) }

// replace takes other's samples instead of fs's, for each key other has.
func (fs floorSet) replace(other floorSet) {
	for key, samples := range other {
		fs[key] = samples
	}
}

// cpu adds the CPU time per pod of a burst of pods under key: its parts are the
// figures cpu/<key>/<part> (see cpuOf).
func (fs floorSet) cpu(key string, u CPUUse, pods int) {
	for part, d := range u.Parts() {
		fs["cpu/"+key+"/"+part] = append(fs["cpu/"+key+"/"+part], ms(d)/float64(pods))
	}
}

// cpuOf is the CPU time per pod of the bursts under key, by part.
func (fs floorSet) cpuOf(key string) cpuSamples {
	out := cpuSamples{}
	for k, v := range fs {
		if part, ok := strings.CutPrefix(k, "cpu/"+key+"/"); ok {
			out[part] = v
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(kib int64) float64 { return float64(kib) / 1024 }

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
	if r.opts.runs("crun") {
		r.Report.Versions["crun"] = firstLine(command(testenv.CrunBinary, "--version"))
	}
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
