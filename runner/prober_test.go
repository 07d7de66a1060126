package runner

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
			pw := &probeWorker{p: r.prober, w: newWorker(r.workerDeps(), "u", &corev1.Pod{}), key: probeKey{"u", "c", tc.kind}}
			pw.probeTarget = probeTarget{target: tg, probe: probe}
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
