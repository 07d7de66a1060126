package runner

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPlanFailsAPodPastItsActiveDeadline(t *testing.T) {
	deadline := func(pod *corev1.Pod) *corev1.Pod {
		secs := int64(60)
		pod.Spec.ActiveDeadlineSeconds = &secs
		return pod
	}
	// exitedAt is an exited container record that finished at minute m.
	exitedAt := func(pod *corev1.Pod, spec string, m int) Container {
		c := ctr(pod, spec, 0)
		c.FinishedAt = t0.Add(time.Duration(m) * time.Minute)
		return c
	}
	never := deadline(planPod(corev1.RestartPolicyNever, true, nil, "app"))
	always := deadline(planPod(corev1.RestartPolicyAlways, true, nil, "app"))
	initNever := deadline(planPod(corev1.RestartPolicyNever, true, []string{"setup"}, "app"))
	withSidecar := deadline(planPod(corev1.RestartPolicyNever, true, []string{"proxy"}, "app"))
	restartAlways := corev1.ContainerRestartPolicyAlways
	withSidecar.Spec.InitContainers[0].RestartPolicy = &restartAlways
	tests := []struct {
		name       string
		pod        *corev1.Pod
		containers []Container
		start      time.Time
		at         time.Duration // after t0
		want       Actions
	}{
		{
			name: "running before its deadline: left alone, a sync due when it passes", pod: always,
			containers: []Container{ctr(always, "app/0/running", 0)}, start: t0, at: 45 * time.Second,
			want: Actions{Waiting: map[string]string{}, Retry: 15 * time.Second},
		},
		{
			name: "running at its deadline: killed and failed", pod: always,
			containers: []Container{ctr(always, "app/0/running", 0)}, start: t0, at: time.Minute,
			want: Actions{KillPod: true, Done: true, Reason: ReasonDeadlineExceeded},
		},
		{
			name: "crash-looping past its deadline: failed, not restarted", pod: always,
			containers: []Container{exitedAt(always, "app/3/exited/1", 2)}, start: t0, at: 3 * time.Minute,
			want: Actions{Done: true, Reason: ReasonDeadlineExceeded},
		},
		{
			name: "killed by its deadline, seen again after a restart: still failed for it", pod: never,
			containers: []Container{exitedAt(never, "app/0/exited/137", 1)}, start: t0, at: 5 * time.Minute,
			want: Actions{Done: true, Reason: ReasonDeadlineExceeded},
		},
		{
			name: "finished before its deadline: keeps its own outcome", pod: never,
			containers: []Container{exitedAt(never, "app/0/exited/0", 0)}, start: t0, at: 5 * time.Minute,
			want: Actions{Done: true},
		},
		{
			name: "a failed init container ended it before its deadline: keeps its own outcome", pod: initNever,
			containers: []Container{exitedAt(initNever, "setup/0/exited/1", 0)}, start: t0, at: 5 * time.Minute,
			want: Actions{Waiting: map[string]string{}, KillPod: true, Done: true},
		},
		{
			name: "finished before its deadline, its sidecar stopped after it: keeps its own outcome", pod: withSidecar,
			containers: []Container{exitedAt(withSidecar, "proxy/0/exited/143", 2), exitedAt(withSidecar, "app/0/exited/0", 0)},
			start:      t0, at: 5 * time.Minute,
			want: Actions{Done: true},
		},
		{
			name: "start not known: no deadline", pod: always,
			containers: []Container{ctr(always, "app/0/running", 0)}, at: time.Hour,
			want: Actions{Waiting: map[string]string{}},
		},
		{
			name: "a deadline that passes before a back-off ends wakes the worker first", pod: always,
			containers: []Container{exitedAt(always, "app/3/exited/1", 0)}, start: t0, at: 50 * time.Second,
			want: Actions{Waiting: map[string]string{"app": ReasonCrashLoopBackOff}, Retry: 10 * time.Second},
		},
	}
	backoff := func(types.UID, string, time.Time, time.Time, time.Time) time.Duration { return 40 * time.Second }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := PodRuntime{UID: tt.pod.UID, Containers: tt.containers, Start: tt.start}
			got := Plan(tt.pod, rt, backoff, t0.Add(tt.at))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan(%s) differs (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

func TestPodStartComesFromTheRuntimeRecords(t *testing.T) {
	seen := t0.Add(time.Hour)
	tests := []struct {
		name string
		rt   PodRuntime
		want time.Time
	}{
		{"nothing made yet: when first seen", PodRuntime{}, seen},
		{"recorded start time", PodRuntime{
			Sandboxes:  []Container{{CreatedAt: t0.Add(2 * time.Minute), PodStart: TimestampOf(t0)}},
			Containers: []Container{{CreatedAt: t0.Add(3 * time.Minute), PodStart: TimestampOf(t0)}},
		}, t0},
		{"beside what a removed instance left: the newest instance's start", PodRuntime{
			Sandboxes:  []Container{{CreatedAt: t0.Add(2 * time.Minute), PodStart: TimestampOf(t0)}, {CreatedAt: t0.Add(5 * time.Minute), PodStart: TimestampOf(t0.Add(4 * time.Minute))}},
			Containers: []Container{{CreatedAt: t0.Add(6 * time.Minute), PodStart: TimestampOf(t0.Add(4 * time.Minute))}, {CreatedAt: t0.Add(3 * time.Minute), PodStart: TimestampOf(t0)}},
		}, t0.Add(4 * time.Minute)},
		{"made before start times were recorded: earliest creation", PodRuntime{
			Containers: []Container{{CreatedAt: t0.Add(3 * time.Minute)}, {CreatedAt: t0.Add(time.Minute)}},
		}, t0.Add(time.Minute)},
	}
	for _, tt := range tests {
		if got := podStart(tt.rt, seen); !got.Equal(tt.want) {
			t.Errorf("podStart(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A Timestamp reads back the time it records, in any zone, and the zero time for none
// or for text that is not one, as the start label of a container always read.
func TestTimestampReadsBackItsTime(t *testing.T) {
	start := time.Date(2026, 1, 1, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	tests := []struct {
		name string
		ts   Timestamp
		want time.Time
	}{
		{"recorded", TimestampOf(start), start},
		{"none", TimestampOf(time.Time{}), time.Time{}},
		{"not a time", "yesterday", time.Time{}},
	}
	for _, tt := range tests {
		if got := tt.ts.Time(); !got.Equal(tt.want) {
			t.Errorf("%s: %q reads %v, want %v", tt.name, tt.ts, got, tt.want)
		}
	}
	if ts := TimestampOf(time.Time{}); ts != "" {
		t.Errorf("the zero time records %q, want nothing", ts)
	}
}

// deadlinePod is a pod whose container sleeps, with an active deadline of secs and a
// preStop hook.
func deadlinePod(t *testing.T, secs int64) *corev1.Pod {
	pod := testPod(t, "job", "sleep 3600", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	pod.Spec.ActiveDeadlineSeconds = &secs
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}}
	return pod
}

// status is the status the worker's pod last published.
func (h *harness) status(uid types.UID) corev1.PodStatus {
	h.t.Helper()
	for _, p := range h.r.Pods() {
		if p.UID == uid {
			return p.Status
		}
	}
	h.t.Fatalf("no status published for %s", uid)
	return corev1.PodStatus{}
}

// reasons are the reasons of the pod's events, in order.
func (h *harness) reasons(uid types.UID) []string {
	var out []string
	for _, e := range h.r.events.Pod(uid) {
		out = append(out, e.Reason)
	}
	return out
}

// restart replaces the runner with a new one on the same runtime and results, as a
// restart of staticpod does.
func (h *harness) restart() {
	h.t.Helper()
	r, err := New(Options{Runtime: h.f, Now: h.clock, HostIP: "10.0.0.1", ResultsDir: h.dir})
	if err != nil {
		h.t.Fatal(err)
	}
	h.r = r
}

func TestDeadlineStopsThePodAsAKillAndFailsItForGood(t *testing.T) {
	h := newHarness(t)
	pod := deadlinePod(t, 3)
	h.r.pub.seen[pod.UID] = t0
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	h.tick(2 * time.Second)
	h.sync(w)
	if st := h.status(pod.UID); st.Phase != corev1.PodRunning || st.Reason != "" {
		t.Fatalf("before its deadline the pod is %s (%q), want Running", st.Phase, st.Reason)
	}

	h.tick(time.Second)
	h.sync(w)
	id := string(pod.UID) + "-c-0"
	if c := h.f.byName(pod.UID)["c/0"]; c.State != StateExited {
		t.Fatalf("at its deadline the container is %s, want stopped", c.State)
	}
	if got := h.f.graces[id]; got != 30*time.Second {
		t.Errorf("the container was stopped with a grace of %v, want the pod's 30s", got)
	}
	if !slices.Contains(h.f.execs, id+": drain") {
		t.Errorf("execs %v: the preStop hook did not run", h.f.execs)
	}
	st := h.status(pod.UID)
	if st.Phase != corev1.PodFailed || st.Reason != ReasonDeadlineExceeded || st.Message != MessageDeadlineExceeded {
		t.Errorf("status = %s %q %q, want Failed %q %q", st.Phase, st.Reason, st.Message, ReasonDeadlineExceeded, MessageDeadlineExceeded)
	}
	if st.StartTime == nil || !st.StartTime.Time.Equal(t0) {
		t.Errorf("startTime = %v, want %v", st.StartTime, t0)
	}

	// No restart policy brings it back, however long it waits.
	for range 3 {
		h.tick(time.Hour)
		h.sync(w)
	}
	if n := h.f.count("CreateContainer"); n != 1 {
		t.Errorf("CreateContainer called %d times, want 1: a pod past its deadline is not restarted", n)
	}
	st = h.status(pod.UID)
	if st.Phase != corev1.PodFailed || st.Reason != ReasonDeadlineExceeded {
		t.Errorf("later status = %s %q, want Failed %q", st.Phase, st.Reason, ReasonDeadlineExceeded)
	}
	if n := slices.Index(h.reasons(pod.UID), ReasonDeadlineExceeded); n < 0 || slices.Index(h.reasons(pod.UID)[n+1:], ReasonDeadlineExceeded) >= 0 {
		t.Errorf("events %v, want one %s", h.reasons(pod.UID), ReasonDeadlineExceeded)
	}

	// Nor does a restart of staticpod: it still says why.
	h.restart()
	h.r.pub.seen[pod.UID] = t0
	w = newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	if st := h.status(pod.UID); st.Phase != corev1.PodFailed || st.Reason != ReasonDeadlineExceeded {
		t.Errorf("after a restart the status is %s %q, want Failed %q", st.Phase, st.Reason, ReasonDeadlineExceeded)
	}
	if n := h.f.count("CreateContainer"); n != 1 {
		t.Errorf("CreateContainer called %d times after a restart, want 1", n)
	}
}

func TestDeadlineCountsFromTheFirstStartAcrossRestarts(t *testing.T) {
	h := newHarness(t)
	pod := deadlinePod(t, 3)
	h.r.pub.seen[pod.UID] = t0
	w := newWorker(h.r.workerDeps(), pod.UID, pod) // first seen at t0: its start
	h.tick(time.Second)                            // its container is made a second later
	h.sync(w)

	h.tick(time.Second) // 2 s after the start, staticpod restarts
	h.restart()
	h.r.pub.seen[pod.UID] = h.clock()
	w = newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	if st := h.status(pod.UID); st.StartTime == nil || !st.StartTime.Time.Equal(t0) {
		t.Fatalf("after a restart startTime = %v, want the first start %v", st.StartTime, t0)
	}
	if c := h.f.byName(pod.UID)["c/0"]; c.State != StateRunning {
		t.Fatalf("the adopted container is %s, want running", c.State)
	}

	h.tick(time.Second) // 3 s after the first start, 1 s after the restart
	h.sync(w)
	if c := h.f.byName(pod.UID)["c/0"]; c.State != StateExited {
		t.Errorf("3 s after the first start the container is %s, want stopped: the deadline counts from the first start", c.State)
	}
	if st := h.status(pod.UID); st.Phase != corev1.PodFailed || st.Reason != ReasonDeadlineExceeded {
		t.Errorf("status = %s %q, want Failed %q", st.Phase, st.Reason, ReasonDeadlineExceeded)
	}
}
