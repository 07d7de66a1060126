package runner

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkProbes100 runs readiness probes for 100 containers with a period of 1 s
// (through the fake runtime, so the cost measured is the probe machinery itself: timers,
// goroutines, results, events; an exec in a real container costs containerd's share
// on top) and reports the goroutines per probe and the runner's CPU time per second
// of wall time.
func BenchmarkProbes100(b *testing.B) {
	const containers = 100
	f := newFakeRuntime(time.Now)
	r, err := New(Options{Runtime: f})
	if err != nil {
		b.Fatal(err)
	}
	pod := &corev1.Pod{}
	pod.UID = types.UID("bench")
	var rt PodRuntime
	for i := range containers {
		name := fmt.Sprintf("c%d", i)
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, ReadinessProbe: &corev1.Probe{
			ProbeHandler:   corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}},
			TimeoutSeconds: 1, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
		}})
		rt.Containers = append(rt.Containers, Container{ID: name, PodUID: pod.UID, Name: name, State: StateRunning, StartedAt: time.Now()})
	}
	w := newWorker(r.workerDeps(), pod.UID, pod)
	before := runtime.NumGoroutine()
	r.prober.sync(w, pod, rt)
	perProbe := float64(runtime.NumGoroutine()-before) / containers
	defer r.prober.stopPod(pod.UID)
	time.Sleep(1100 * time.Millisecond) // every probe has run once
	b.ResetTimer()
	var cpu time.Duration
	for b.Loop() {
		start := cpuTime()
		time.Sleep(time.Second)
		cpu += cpuTime() - start
	}
	b.ReportMetric(perProbe, "goroutines/probe")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/s")
	b.ReportMetric(float64(f.count("Exec"))/float64(containers), "execs/probe")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
