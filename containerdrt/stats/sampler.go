package stats

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
)

// DefaultPeriod is the kubelet's housekeeping interval, how often cAdvisor reads the
// cgroups of the pods: the oldest figures a read gets.
const DefaultPeriod = 10 * time.Second

// DefaultIdlePeriod is how often the cgroups are read while nobody reads the figures.
const DefaultIdlePeriod = time.Minute

// Config configures a Sampler.
type Config struct {
	// Pods are the wanted pods with their statuses (the runner's Pods): a pod's cgroup
	// comes from its UID and QoS class, a container's from its status's containerID.
	Pods    func() []*corev1.Pod
	Cgroups cgroups.Pods // where pods and containers are placed
	Node    string       // the node's name in the summary

	// PodLogDir is the root of the pods' log directories (logs.DefaultPodsDir when
	// empty): a container's log directory is its Logs, counted in the pod's ephemeral
	// storage.
	PodLogDir string
	// Disks are the pods' volumes and the containers' writable layers (nil: neither is
	// measured); RootDir is staticpod's root directory, whose filesystem is the node's.
	Disks   Disks
	RootDir string
	// Period is how old the figures a read gets may be (DefaultPeriod when 0): a read
	// of an older sample takes a new one first. IdlePeriod is how often the cgroups are
	// read while nobody reads the figures (DefaultIdlePeriod when 0), so that a read
	// after a quiet spell has a CPU rate: over that spell. The disks are looked at every
	// Period.
	Period     time.Duration
	IdlePeriod time.Duration
	// DiskPeriod is how often a pod's disk use is measured again (DefaultDiskPeriod
	// when 0): a walk of its volumes and log directories.
	DiskPeriod time.Duration
	Log        *slog.Logger

	// For tests: the cgroup mount point (cgroups.MountPoint), whether it is cgroup v2
	// (cgroups.Unified), /proc/meminfo, the clock.
	Mount   string
	Unified *bool
	Meminfo string
	Stat    string // /proc/stat, whose btime is the node's start time
	Now     func() time.Time
}

// Sampler reads the cgroups of the node, every pod and every running container when
// the figures are read and are older than its period, and on its idle period
// otherwise, and keeps the figures for the API to read. The kubelet's cAdvisor reads
// them every period whether anyone asks or not, because its eviction manager needs
// them; staticpod evicts nothing on memory, so a daemon nobody asks reads them once
// per idle period.
type Sampler struct {
	cfg     Config
	unified bool
	booted  time.Time // the node's start time; zero if unknown

	sampling sync.Mutex // one sample at a time: the idle period's and reads' own

	mu      sync.Mutex
	last    sample               // the latest sample; its time is zero without pods
	prev    map[string]cpuSample // the CPU time of each cgroup dir at the sample before
	samples int                  // samples taken; tests wait on it
	changed chan struct{}        // closed and renewed at each sample

	disks       disks  // the last measure of the disks
	diskSamples int    // SampleDisks calls, measuring or not
	imageRoot   string // the snapshotter's root, as last reported; SampleDisks' own
}

// sample is one reading of the node and the pods.
type sample struct {
	at   time.Time
	node reading
	pods []podReading
}

// reading is one cgroup's usage and its CPU rate since the sample before.
type reading struct {
	at        time.Time
	usage     Usage
	nanoCores *uint64 // nil on a cgroup's first sample
	err       error
}

type podReading struct {
	ref        types.UID
	pod        *corev1.Pod
	reading    reading
	containers []containerReading
}

type containerReading struct {
	name    string
	id      string
	started time.Time
	reading reading
}

type cpuSample struct {
	at    time.Time
	nanos uint64
}

// New returns a Sampler for cfg; Run samples.
func New(cfg Config) *Sampler {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.IdlePeriod <= 0 {
		cfg.IdlePeriod = DefaultIdlePeriod
	}
	if cfg.DiskPeriod <= 0 {
		cfg.DiskPeriod = DefaultDiskPeriod
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Mount == "" {
		cfg.Mount = cgroups.MountPoint
	}
	if cfg.Meminfo == "" {
		cfg.Meminfo = "/proc/meminfo"
	}
	if cfg.Stat == "" {
		cfg.Stat = "/proc/stat"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sampler{cfg: cfg, prev: map[string]cpuSample{}, changed: make(chan struct{})}
	if stat, err := readStat(cfg.Stat, "btime"); err == nil && stat[0] > 0 {
		s.booted = time.Unix(int64(stat[0]), 0)
	}
	if cfg.Unified != nil {
		s.unified = *cfg.Unified
	} else {
		s.unified = cgroups.Unified()
	}
	return s
}

// Run samples at once and then on the idle period until ctx is done (a read samples
// too, see Summary); the disks are looked at every period, apart, so that a slow walk
// delays no CPU figure, but each pod is measured only every DiskPeriod (and when it
// appears or its containers change). With no pods wanted nothing is read, and the
// summary is empty.
func (s *Sampler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.every(ctx, s.cfg.Period, func() { s.SampleDisks(ctx) }) })
	s.every(ctx, s.cfg.IdlePeriod, s.fresh)
	return nil
}

// every calls f at once and then every period until ctx is done.
func (s *Sampler) every(ctx context.Context, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fresh takes a sample unless the latest is younger than the period: reads and the
// idle period's ticks share it, so that a reader asking more often than the idle period
// adds no samples to its own.
func (s *Sampler) fresh() {
	s.sampling.Lock()
	defer s.sampling.Unlock()
	s.mu.Lock()
	taken := s.last.at // zero without pods: a read looks again
	s.mu.Unlock()
	if !taken.IsZero() && s.cfg.Now().Sub(taken) < s.cfg.Period {
		return
	}
	s.sample()
}

// Sample reads every cgroup once now.
func (s *Sampler) Sample() {
	s.sampling.Lock()
	defer s.sampling.Unlock()
	s.sample()
}

func (s *Sampler) sample() {
	pods := s.cfg.Pods()
	if len(pods) == 0 {
		s.store(sample{}, nil)
		return
	}
	next := map[string]cpuSample{}
	smp := sample{at: s.cfg.Now()}
	smp.node = s.read("/", next, true)
	seen := map[types.UID]bool{}
	for _, p := range pods {
		if seen[p.UID] || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		seen[p.UID] = true
		pr := podReading{ref: p.UID, pod: p, reading: s.read(s.cfg.Cgroups.PodDir(p), next, false)}
		if pr.reading.err != nil {
			continue // no cgroup yet (the pod is starting) or any more
		}
		for _, cs := range p.Status.ContainerStatuses {
			_, id, ok := strings.Cut(cs.ContainerID, "://")
			if !ok || cs.State.Running == nil {
				continue
			}
			r := s.read(cgroups.Dir(s.cfg.Cgroups.Container(p, id)), next, false)
			if r.err != nil {
				continue
			}
			pr.containers = append(pr.containers, containerReading{name: cs.Name, id: id, started: cs.State.Running.StartedAt.Time, reading: r})
		}
		smp.pods = append(smp.pods, pr)
	}
	s.store(smp, next)
}

func (s *Sampler) store(smp sample, next map[string]cpuSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = smp
	if next == nil {
		next = map[string]cpuSample{}
	}
	s.prev = next
	s.samples++
	close(s.changed)
	s.changed = make(chan struct{})
}

// read reads the cgroup dir and its CPU rate since the sample before, recording its
// CPU time in next.
func (s *Sampler) read(dir string, next map[string]cpuSample, node bool) reading {
	r := reading{at: s.cfg.Now()}
	switch {
	case node && s.unified:
		r.usage, r.err = ReadNodeV2(s.cfg.Mount, s.cfg.Meminfo)
	case s.unified:
		r.usage, r.err = ReadV2(s.cfg.Mount, dir)
	default:
		r.usage, r.err = ReadV1(s.cfg.Mount, dir)
	}
	if r.err != nil {
		return r
	}
	next[dir] = cpuSample{at: r.at, nanos: r.usage.CPUNanos}
	s.mu.Lock()
	prev, ok := s.prev[dir]
	s.mu.Unlock()
	if dt := r.at.Sub(prev.at); ok && dt > 0 && r.usage.CPUNanos >= prev.nanos {
		rate := uint64(float64(r.usage.CPUNanos-prev.nanos) * float64(time.Second) / float64(dt))
		r.nanoCores = &rate
	}
	return r
}

// Samples is how many samples were taken, and a channel closed at the next one.
func (s *Sampler) Samples() (int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.changed
}

// DiskSamples is how many times the disks were looked at, measured or not.
func (s *Sampler) DiskSamples() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.diskSamples
}
