package runner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
)

// TestProbeResults runs probes against a fake exec whose exit codes the table gives, one
// per probe, and checks the verdict after each: "ok", "-" (not ok), or "failed" (not
// ok, and a liveness or startup probe asks for a restart). Each kind starts as the
// kubelet starts it: liveness ok, readiness and startup not.
func TestProbeResults(t *testing.T) {
	for _, tc := range []struct {
		kind                ProbeType
		success, failure    int32
		codes               []int
		want                string
		startupNotYetPassed bool // the container has a startup probe that has not passed
	}{
		{kind: Liveness, success: 1, failure: 3, codes: []int{1, 1, 1, 0}, want: "ok ok failed ok"},
		{kind: Liveness, success: 1, failure: 1, codes: []int{0, 1}, want: "ok failed"},
		{kind: Liveness, success: 1, failure: 2, codes: []int{1, 0, 1, 1}, want: "ok ok ok failed"},
		{kind: Readiness, success: 1, failure: 3, codes: []int{0, 1, 1, 1, 0}, want: "ok ok ok - ok"},
		{kind: Readiness, success: 2, failure: 1, codes: []int{0, 0, 1, 0, 0}, want: "- ok - - ok"},
		{kind: Startup, success: 1, failure: 3, codes: []int{1, 0}, want: "- ok"},
		{kind: Startup, success: 1, failure: 2, codes: []int{1, 1}, want: "- failed"},
		// Until the startup probe passes, liveness and readiness probes do not run.
		{kind: Liveness, success: 1, failure: 1, codes: []int{1, 1}, want: "ok ok", startupNotYetPassed: true},
		{kind: Readiness, success: 1, failure: 1, codes: []int{0, 0}, want: "- -", startupNotYetPassed: true},
	} {
		name := fmt.Sprintf("%s %d/%d %v", tc.kind, tc.success, tc.failure, tc.codes)
		if tc.startupNotYetPassed {
			name += " before startup"
		}
		t.Run(name, func(t *testing.T) {
			r, tg := handlerTarget(0)
			f := r.rt.(*fakeRuntime)
			probe := &corev1.Probe{
				ProbeHandler:   corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}},
				TimeoutSeconds: 1, PeriodSeconds: 1, SuccessThreshold: tc.success, FailureThreshold: tc.failure,
			}
			if tc.startupNotYetPassed {
				tg.container.StartupProbe = probe.DeepCopy()
				startup := probeKey{"u", "c", Startup}
				r.prober.results[startup] = probeResult{containerID: "c1"}
			}
			pw := newProbeWorker(r.prober, newWorker(r.workerDeps(), "u", &corev1.Pod{}), probeKey{"u", "c", tc.kind}, probeTarget{target: tg, probe: probe})
			r.prober.workers[pw.key] = pw
			r.prober.results[pw.key] = probeResult{containerID: "c1", ok: tc.kind == Liveness}
			var got []string
			for _, code := range tc.codes {
				f.execCode["c1"] = code
				pw.probeOnce()
				res, _ := r.prober.result("u", "c", tc.kind, "c1")
				switch {
				case res.failed:
					got = append(got, "failed")
				case res.ok:
					got = append(got, "ok")
				default:
					got = append(got, "-")
				}
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("verdicts %q, want %q", strings.Join(got, " "), tc.want)
			}
			if ran := f.count("Exec"); tc.startupNotYetPassed && ran != 0 {
				t.Errorf("%d probes ran before the startup probe passed", ran)
			}
		})
	}
}

// TestProbeWaitsForItsInitialDelay tries a probe at moments after its container's start
// (on the runner's clock) and counts the execs: none before initialDelaySeconds has
// passed, whatever the kind, and the verdict stays the kind's initial one meanwhile.
// A container that started long ago (adopted after a restart) is probed at once.
func TestProbeWaitsForItsInitialDelay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		started time.Duration   // the container's start, from the first try
		tries   []time.Duration // moments of the tries, from the first try
		want    string          // the execs counted after each try
	}{
		{name: "started now", tries: []time.Duration{0, 5 * time.Second, 9*time.Second + 999*time.Millisecond, 10 * time.Second, 11 * time.Second}, want: "0 0 0 1 2"},
		{name: "started before the delay", started: -20 * time.Second, tries: []time.Duration{0}, want: "1"},
	} {
		for _, kind := range []ProbeType{Liveness, Readiness, Startup} {
			t.Run(fmt.Sprintf("%s %s", tc.name, kind), func(t *testing.T) {
				h := newHarness(t)
				probe := &corev1.Probe{
					ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}},
					InitialDelaySeconds: 10, TimeoutSeconds: 1, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
				}
				h.f.execCode["c1"] = 1
				tg := target{pod: &corev1.Pod{}, container: &corev1.Container{Name: "c"}, id: "c1"}
				pw := newProbeWorker(h.r.prober, newWorker(h.r.workerDeps(), "u", &corev1.Pod{}), probeKey{"u", "c", kind}, probeTarget{target: tg, probe: probe, started: t0.Add(tc.started)})
				initial := probeResult{containerID: "c1", ok: kind == Liveness}
				h.r.prober.workers[pw.key] = pw
				h.r.prober.results[pw.key] = initial

				if left, want := pw.delayLeft(t0.Add(3*time.Second)), max(7*time.Second+tc.started, 0); left != want {
					t.Errorf("3s in, the first probe is set %v ahead, want %v", left, want)
				}
				var got []string
				for _, at := range tc.tries {
					h.tick(t0.Add(at).Sub(h.clock()))
					pw.probeOnce()
					n := h.f.count("Exec")
					got = append(got, fmt.Sprint(n))
					if res, _ := h.r.prober.result("u", "c", kind, "c1"); n == 0 && res != initial {
						t.Errorf("at %v, before any probe ran, the verdict is %+v, want %+v", at, res, initial)
					}
				}
				if strings.Join(got, " ") != tc.want {
					t.Errorf("execs after each try %q, want %q", strings.Join(got, " "), tc.want)
				}
			})
		}
	}
}

// TestFailedProbeKillsWithTheProbesGrace: a container killed for a failed liveness or
// startup probe is stopped with that probe's terminationGracePeriodSeconds, else with
// the pod's, as the kubelet's killContainer does.
func TestFailedProbeKillsWithTheProbesGrace(t *testing.T) {
	secs := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name                      string
		failed                    ProbeType
		livenessGrace, startGrace *int64
		want                      time.Duration
	}{
		{name: "liveness with its own grace", failed: Liveness, livenessGrace: secs(5), startGrace: secs(7), want: 5 * time.Second},
		{name: "startup with its own grace", failed: Startup, livenessGrace: secs(5), startGrace: secs(7), want: 7 * time.Second},
		{name: "liveness without one", failed: Liveness, startGrace: secs(7), want: 30 * time.Second},
		{name: "startup without one", failed: Startup, livenessGrace: secs(5), want: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			pod := testPod(t, "web", "httpd -f", corev1.RestartPolicyAlways)
			pod.Spec.TerminationGracePeriodSeconds = secs(30)
			c := &pod.Spec.Containers[0]
			handler := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}}
			c.LivenessProbe = &corev1.Probe{ProbeHandler: handler, TerminationGracePeriodSeconds: tc.livenessGrace}
			c.StartupProbe = &corev1.Probe{ProbeHandler: handler, TerminationGracePeriodSeconds: tc.startGrace}
			running := Container{ID: "c1", Kind: KindContainer, PodUID: pod.UID, Name: c.Name, State: StateRunning, CreatedAt: t0, StartedAt: t0}
			h.f.put(running)
			h.r.prober.results[probeKey{pod.UID, c.Name, tc.failed}] = probeResult{containerID: "c1", failed: true, message: "exit 1"}
			w := newWorker(h.r.workerDeps(), pod.UID, pod)

			if !w.killUnhealthy(h.ctx, pod, PodRuntime{UID: pod.UID, Containers: []Container{running}}) {
				t.Fatal("killUnhealthy stopped nothing")
			}
			if got := h.f.graces["c1"]; got != tc.want {
				t.Errorf("the container was stopped with a grace of %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStopAllCancelsTheProbeInFlight stops the prober while a probe's exec is still
// running (held in the fake until its context ends, as a probe command that outlives
// the runner would be): stopAll must cancel that exec and return only once it has
// ended, and the cancelled probe must not count as a failure. Before, stopAll only
// told the workers to stop; the exec went on in its container after the runner had
// returned and its runtime was closed.
func TestStopAllCancelsTheProbeInFlight(t *testing.T) {
	h := newHarness(t)
	h.f.gate["Exec"] = make(chan struct{}) // never opened: only the probe's context ends it
	pod := &corev1.Pod{}
	pod.UID = "u"
	pod.Spec.Containers = []corev1.Container{{Name: "c", LivenessProbe: &corev1.Probe{
		ProbeHandler:   corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}},
		TimeoutSeconds: 600, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
	}}}
	rt := PodRuntime{UID: pod.UID, Containers: []Container{{ID: "c1", PodUID: pod.UID, Name: "c", State: StateRunning, StartedAt: t0.Add(-time.Hour)}}}
	h.r.prober.sync(newWorker(h.r.workerDeps(), pod.UID, pod), pod, rt)
	testenv.Await(t, "the probe's exec", time.Minute, func() bool { return h.f.count("Exec") == 1 })

	stopped := make(chan struct{})
	go func() {
		h.r.prober.stopAll()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("stopAll did not return with a probe's exec in flight")
	}
	h.f.mu.Lock()
	killed := h.f.execsKilled
	h.f.mu.Unlock()
	if killed != 1 {
		t.Errorf("stopAll returned with %d of 1 execs in flight ended: the probe outlives the prober", killed)
	}
	for _, e := range h.r.events.All() {
		if e.Reason == "Unhealthy" {
			t.Errorf("a cancelled probe was reported: %s", e.Message)
		}
	}
}
