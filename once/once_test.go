package once

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/runner"
)

// pod is web-node1 in the default namespace, in phase, with the statuses of its app
// and init containers. exitCode and printSummary read the spec of no pod they have a
// status of.
func pod(phase corev1.PodPhase, apps []corev1.ContainerStatus, inits ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default"},
		Status:     corev1.PodStatus{Phase: phase, ContainerStatuses: apps, InitContainerStatuses: inits},
	}
}

func ready(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	return p
}

func running(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func waiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func exited(name, reason string, code int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}}}
}

func TestExitCode(t *testing.T) {
	job := func(policy corev1.RestartPolicy) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: policy}}
	}
	failed := func(inits []corev1.ContainerStatus, apps ...corev1.ContainerStatus) *corev1.Pod {
		return pod(corev1.PodFailed, apps, inits...)
	}
	up := ready(pod(corev1.PodRunning, []corev1.ContainerStatus{running("main")}))
	for _, tc := range []struct {
		name      string
		want, got []*corev1.Pod
		code      int
	}{
		{"all succeeded", []*corev1.Pod{job(corev1.RestartPolicyNever), job(corev1.RestartPolicyAlways)},
			[]*corev1.Pod{pod(corev1.PodSucceeded, nil), up}, 0},
		{"first failure wins", []*corev1.Pod{job(corev1.RestartPolicyOnFailure), job(corev1.RestartPolicyNever), job(corev1.RestartPolicyNever)},
			[]*corev1.Pod{pod(corev1.PodSucceeded, nil), failed(nil, exited("a", "Completed", 0), exited("b", "Error", 3)), failed(nil, exited("c", "Error", 4))}, 3},
		{"init container first", []*corev1.Pod{job(corev1.RestartPolicyNever)},
			[]*corev1.Pod{failed([]corev1.ContainerStatus{exited("setup", "Error", 7)}, waiting("main", runner.ReasonPodInitializing))}, 7},
		{"failed without a code", []*corev1.Pod{job(corev1.RestartPolicyNever)}, []*corev1.Pod{failed(nil, waiting("main", runner.ReasonRunContainerError))}, 1},
		{"exit 256 is not success", []*corev1.Pod{job(corev1.RestartPolicyNever)}, []*corev1.Pod{failed(nil, exited("main", "Error", 256))}, 1},
		{"not done", []*corev1.Pod{job(corev1.RestartPolicyAlways)}, []*corev1.Pod{nil}, 1},
		{"an Always pod failed by its deadline", []*corev1.Pod{job(corev1.RestartPolicyAlways)},
			[]*corev1.Pod{deadlineExceeded(failed(nil, exited("main", "Error", 137)))}, 137},
		{"failed by its deadline, still stopping", []*corev1.Pod{job(corev1.RestartPolicyNever)},
			[]*corev1.Pod{deadlineExceeded(failed(nil, running("main")))}, 1},
	} {
		if got := exitCode(tc.want, tc.got); got != tc.code {
			t.Errorf("%s: exitCode = %d, want %d", tc.name, got, tc.code)
		}
	}
}

func deadlineExceeded(p *corev1.Pod) *corev1.Pod {
	p.Status.Reason, p.Status.Message = runner.ReasonDeadlineExceeded, runner.MessageDeadlineExceeded
	return p
}

// A CI log, not a terminal, says why staticpod failed a pod, once.
func TestProgressTellsWhyAPodFailedOutsideATerminal(t *testing.T) {
	var out bytes.Buffer
	p := &progress{w: &out, told: map[types.UID]string{}}
	want := []*corev1.Pod{{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways}}}
	got := []*corev1.Pod{deadlineExceeded(pod(corev1.PodFailed, []corev1.ContainerStatus{exited("main", "Error", 137)}))}
	for range 2 { // told once, however often asked
		if !p.pods(want, got) {
			t.Error("an Always pod that failed is not done")
		}
	}
	if stopping := []*corev1.Pod{deadlineExceeded(pod(corev1.PodFailed, []corev1.ContainerStatus{running("main")}))}; p.pods(want, stopping) {
		t.Error("a failed pod whose container still runs is done")
	}
	line := "web-node1: Failed: DeadlineExceeded: " + runner.MessageDeadlineExceeded + "\n"
	if !strings.HasSuffix(out.String(), line) || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("progress said %q, want once %q", out.String(), line)
	}
}

// TestRefusedAlwaysPodIsDone checks that once stops waiting for an Always pod that is
// Failed (refused at admission, SysctlForbidden say): it will never be Ready.
func TestRefusedAlwaysPodIsDone(t *testing.T) {
	want := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways}}
	if !done(want, pod(corev1.PodFailed, nil)) {
		t.Error("a Failed Always pod is not done: once would wait for it until --timeout")
	}
	if done(want, pod(corev1.PodRunning, []corev1.ContainerStatus{running("main")})) {
		t.Error("a running Always pod that is not Ready is done")
	}
}

func TestSummaryAndPrefixedLines(t *testing.T) {
	web := ready(pod(corev1.PodRunning, []corev1.ContainerStatus{running("main")}, exited("setup", "Completed", 0)))
	crash := waiting("main", runner.ReasonCrashLoopBackOff)
	crash.RestartCount = 2
	crash.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1}
	loop := pod(corev1.PodRunning, []corev1.ContainerStatus{crash})
	loop.Name = "loop-node1"
	never := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late-node1", Namespace: "ci"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}}
	var out bytes.Buffer
	printSummary(&out, []*corev1.Pod{web, loop, never}, []*corev1.Pod{web, loop, nil})
	want := `POD             CONTAINER      STATE              EXIT   RESTARTS
web-node1       setup (init)   Completed          0      0
web-node1       main           Running            -      0
loop-node1      main           CrashLoopBackOff   1      2
ci/late-node1   main           NotStarted         -      0
`
	if out.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	w := &prefixedLines{out: &out, prefix: "job-node1/main | "}
	fmt.Fprint(w, "one\n")
	fmt.Fprint(w, "cut short")
	if got := out.String(); got != "job-node1/main | one\njob-node1/main | cut short\n" {
		t.Errorf("prefixed lines: %q", got)
	}
}
