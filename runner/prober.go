package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/runner/action"
	"github.com/staticpod/staticpod/runner/events"
)

// ProbeType names the three probes of a container.
type ProbeType string

const (
	Liveness  ProbeType = "Liveness"
	Readiness ProbeType = "Readiness"
	Startup   ProbeType = "Startup"
)

type probeKey struct {
	uid       types.UID
	container string
	kind      ProbeType
}

// probeResult is a probe's verdict on one container: ok is what the thresholds say,
// failed is set once the failure threshold is reached (what restarts a container on
// a liveness or startup probe).
type probeResult struct {
	containerID string
	ok          bool
	failed      bool
	message     string
}

// prober runs the probes of every running container: one goroutine and one timer per
// probe, started when its container runs and stopped when it no longer does (or its
// pod is removed). Results wake the pod's worker when they change.
type prober struct {
	rt     Runtime          // runs the probes' actions: exec in the container, dials into the pod
	events *events.Store    // a failed probe is an event
	now    func() time.Time // the runner's clock: initialDelaySeconds counts on it

	mu      sync.Mutex // guards workers and results
	workers map[probeKey]*probeWorker
	results map[probeKey]probeResult
	running sync.WaitGroup // the workers' goroutines, each with its probe in flight
}

func newProber(rt Runtime, events *events.Store, now func() time.Time) *prober {
	return &prober{rt: rt, events: events, now: now, workers: map[probeKey]*probeWorker{}, results: map[probeKey]probeResult{}}
}

// sync makes the probe workers of a pod match its running containers. w is the pod's
// worker, signalled when a result changes.
func (p *prober) sync(w *worker, pod *corev1.Pod, rt PodRuntime) {
	want := map[probeKey]probeTarget{}
	sandbox := runningSandbox(rt)
	cur := rt.sinceSandbox()
	for _, c := range allContainers(pod) {
		last := cur.Latest(c.Name)
		if last == nil || last.State != StateRunning {
			continue
		}
		t := target{pod: pod, container: c, id: last.ID, sandbox: sandbox}
		for kind, probe := range map[ProbeType]*corev1.Probe{Liveness: c.LivenessProbe, Readiness: c.ReadinessProbe, Startup: c.StartupProbe} {
			if probe != nil {
				want[probeKey{pod.UID, c.Name, kind}] = probeTarget{target: t, probe: probe, started: last.StartedAt}
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, pw := range p.workers {
		if key.uid != pod.UID {
			continue
		}
		if t, ok := want[key]; !ok || t.id != pw.id {
			pw.stop()
			delete(p.workers, key)
			delete(p.results, key)
		}
	}
	for key, t := range want {
		if _, ok := p.workers[key]; ok {
			continue
		}
		pw := newProbeWorker(p, w, key, t)
		p.workers[key] = pw
		p.results[key] = probeResult{containerID: t.id, ok: key.kind == Liveness}
		p.running.Go(pw.run)
	}
}

// stopPod stops every probe of a pod.
func (p *prober) stopPod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, pw := range p.workers {
		if key.uid == uid {
			pw.stop()
			delete(p.workers, key)
			delete(p.results, key)
		}
	}
}

// stopAll stops every probe and returns once none runs: a probe in flight is cancelled
// (an exec killed in its container) rather than left to use a runtime about to close.
func (p *prober) stopAll() {
	p.mu.Lock()
	for key, pw := range p.workers {
		pw.stop()
		delete(p.workers, key)
		delete(p.results, key)
	}
	p.mu.Unlock()
	p.running.Wait()
}

// result returns a probe's current verdict for the container with id, and whether
// there is one.
func (p *prober) result(uid types.UID, container string, kind ProbeType, id string) (probeResult, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.results[probeKey{uid, container, kind}]
	if !ok || r.containerID != id {
		return probeResult{}, false
	}
	return r, true
}

func (p *prober) set(key probeKey, r probeResult) (changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, ok := p.results[key]
	if !ok || old.containerID != r.containerID {
		return false // the worker was stopped meanwhile
	}
	p.results[key] = r
	return old.ok != r.ok || old.failed != r.failed
}

// started reports whether the container's startup probe (if any) has succeeded.
func (p *prober) started(uid types.UID, c *corev1.Container, id string) bool {
	if c.StartupProbe == nil {
		return true
	}
	r, ok := p.result(uid, c.Name, Startup, id)
	return ok && r.ok
}

type probeTarget struct {
	target
	probe   *corev1.Probe
	started time.Time // when the container started: initialDelaySeconds counts from it
}

// probeWorker probes one container with one probe on a timer until stopped.
type probeWorker struct {
	probeTarget
	p    *prober
	w    *worker
	key  probeKey
	ctx  context.Context // done once the worker is stopped: its probe in flight is cancelled
	stop context.CancelFunc

	successes, failures int32 // owned by run
}

func newProbeWorker(p *prober, w *worker, key probeKey, t probeTarget) *probeWorker {
	pw := &probeWorker{p: p, w: w, key: key, probeTarget: t}
	pw.ctx, pw.stop = context.WithCancel(context.Background())
	return pw
}

func (pw *probeWorker) run() {
	timer := time.NewTimer(pw.delayLeft(pw.p.now()))
	defer timer.Stop()
	for {
		select {
		case <-pw.ctx.Done():
			return
		case <-timer.C:
		}
		if pw.probeOnce() {
			return // a startup probe that succeeded is done
		}
		timer.Reset(time.Duration(pw.probe.PeriodSeconds) * time.Second)
	}
}

// delayLeft is what remains at now of the probe's initialDelaySeconds, counted from the
// container's start as the kubelet counts it; zero once it has passed.
func (pw *probeWorker) delayLeft(now time.Time) time.Duration {
	return max(time.Duration(pw.probe.InitialDelaySeconds)*time.Second-now.Sub(pw.started), 0)
}

// probeOnce runs the probe once and records the verdict. No probe runs before its
// initial delay has passed (the kubelet's worker skips such a tick too; run's first
// timer is set for the delay's end), and liveness and readiness wait for the startup
// probe. It returns true when the worker has nothing left to do.
func (pw *probeWorker) probeOnce() bool {
	if pw.delayLeft(pw.p.now()) > 0 {
		return false
	}
	if pw.key.kind != Startup && !pw.p.started(pw.key.uid, pw.container, pw.id) {
		return false
	}
	ctx, cancel := context.WithTimeout(pw.ctx, time.Duration(pw.probe.TimeoutSeconds)*time.Second)
	err := runAction(ctx, pw.p.rt, pw.target, action.Probe(pw.probe))
	cancel()
	if pw.ctx.Err() != nil {
		return true // stopped meanwhile: a cancelled probe is no verdict
	}
	res := probeResult{containerID: pw.id}
	if err == nil {
		pw.successes, pw.failures = pw.successes+1, 0
	} else {
		pw.failures, pw.successes = pw.failures+1, 0
		res.message = err.Error()
		pw.p.events.Add(events.Record{UID: pw.key.uid, Pod: podRef(pw.pod), Container: pw.container.Name, Type: events.Warning,
			Reason: "Unhealthy", Message: fmt.Sprintf("%s probe failed: %v", pw.key.kind, err)})
	}
	prev, _ := pw.p.result(pw.key.uid, pw.container.Name, pw.key.kind, pw.id)
	res.ok = prev.ok
	switch {
	case err == nil && pw.successes >= pw.probe.SuccessThreshold:
		res.ok = true
	case err != nil && pw.failures >= pw.probe.FailureThreshold:
		res.ok, res.failed = false, pw.key.kind != Readiness
	}
	if pw.p.set(pw.key, res) {
		pw.w.signal()
	}
	return pw.key.kind == Startup && res.ok
}
