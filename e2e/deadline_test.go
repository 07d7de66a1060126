package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// deadlineManifest is an Always pod with an active deadline of 3 s whose container
// sleeps until SIGTERM ends it, and whose preStop hook writes to hooks.
func deadlineManifest(hooks string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: deadline}
spec:
  hostNetwork: true
  restartPolicy: Always
  activeDeadlineSeconds: 3
  terminationGracePeriodSeconds: 10
  volumes: [{name: hooks, hostPath: {path: ` + filepath.Dir(hooks) + `}}]
  containers:
  - name: main
    image: ` + e2eImage + `
    command: [sh, -c, "trap 'exit 143' TERM; sleep 3600 & wait"]
    volumeMounts: [{name: hooks, mountPath: /hooks}]
    lifecycle:
      preStop:
        exec: {command: [sh, -c, "echo stopping >> /hooks/` + filepath.Base(hooks) + `"]}
`
}

// A pod past its activeDeadlineSeconds is stopped as any kill (its preStop hook runs)
// and is Failed with reason DeadlineExceeded, for good. The deadline counts from the
// pod's first start: staticpod restarted meanwhile kills it when that deadline has
// passed, not 3 s after its own start.
func TestActiveDeadlineFailsThePodCountedFromItsFirstStart(t *testing.T) {
	const deadline = 3 * time.Second
	n := newNode(t)
	hooks := n.path("hooks/ran")
	if err := os.MkdirAll(filepath.Dir(hooks), 0o755); err != nil {
		t.Fatal(err)
	}
	sp := n.start()
	n.write("deadline.yaml", deadlineManifest(hooks))
	const key = "deadline-node1/main/0"
	cs := n.await("the pod running", time.Minute, running(key))
	start := cs[key].PodStart.Time()
	if start.IsZero() {
		t.Fatalf("the container does not record its pod's start time: %+v", cs[key])
	}
	var before corev1.Pod
	testenv.Await(t, "the pod's startTime through the API", 30*time.Second, func() bool {
		before = n.pods()["deadline-node1"]
		return before.Status.StartTime != nil
	})

	// staticpod stops mid-deadline and comes back 1.5 s after the pod's start, or later.
	sp.stop()
	testenv.Await(t, "1.5 s after the pod's start", 10*time.Second, func() bool { return time.Since(start) > 1500*time.Millisecond })
	restarted := time.Now()
	n.start()

	cs = n.await("the container stopped", time.Minute, exited(key))
	failed := n.awaitPhase("deadline-node1", corev1.PodFailed)
	if failed.Status.Reason != runner.ReasonDeadlineExceeded || failed.Status.Message != runner.MessageDeadlineExceeded {
		t.Errorf("status reason %q, message %q; want %q, %q", failed.Status.Reason, failed.Status.Message, runner.ReasonDeadlineExceeded, runner.MessageDeadlineExceeded)
	}
	if !failed.Status.StartTime.Equal(before.Status.StartTime) {
		t.Errorf("after the restart startTime = %v, before it %v: the pod's start was reset", failed.Status.StartTime, before.Status.StartTime)
	}
	finished := cs[key].FinishedAt
	if finished.Sub(start) < deadline {
		t.Errorf("the container stopped %v after the pod's start, before its deadline of %v", finished.Sub(start).Round(time.Millisecond), deadline)
	}
	if finished.Sub(restarted) >= deadline {
		t.Errorf("the container stopped %v after staticpod restarted (%v after the pod's start): the deadline counted from the restart", finished.Sub(restarted).Round(time.Millisecond), finished.Sub(start).Round(time.Millisecond))
	}
	if code := cs[key].ExitCode; code != 143 {
		t.Errorf("exit code %d, want 143: stopped by SIGTERM within its grace period", code)
	}
	awaitFile(t, hooks, "stopping")
	n.awaitEvent(runner.ReasonDeadlineExceeded, "longer than the specified deadline")

	// The restart policy does not bring it back.
	n.awaitRelists(5)
	if c, ok := n.containers()["deadline-node1/main/1"]; ok {
		t.Errorf("the pod was restarted after its deadline: %+v", c)
	}
	if p := n.pods()["deadline-node1"]; p.Status.Phase != corev1.PodFailed || p.Status.Reason != runner.ReasonDeadlineExceeded {
		t.Errorf("later the pod is %s %q, want Failed %q", p.Status.Phase, p.Status.Reason, runner.ReasonDeadlineExceeded)
	}
	n.removeAndAwaitGone("deadline.yaml")
}

// once, the CI mode, reports a pod past its deadline as failed, says why, and exits
// with the code of the container the deadline stopped.
func TestOnceReportsAPodPastItsDeadline(t *testing.T) {
	o := newOnceEnv(t)
	o.write("job.yaml", podManifest("job", "Never", "trap 'exit 143' TERM; sleep 3600 & wait", "  activeDeadlineSeconds: 2\n"))
	_, errOut, code, ns := o.run("--timeout", "1m") // without the deadline: 124, and cleaned up
	if code != 143 {
		t.Errorf("once: exit %d, want 143 (the container's, stopped by the deadline)", code)
	}
	if want := "job-node1: Failed: " + runner.ReasonDeadlineExceeded + ": " + runner.MessageDeadlineExceeded; !strings.Contains(errOut, want) {
		t.Errorf("once's output lacks %q:\n%s", want, errOut)
	}
	if !regexp.MustCompile(`job-node1\s+main\s+Error\s+143\s+0`).MatchString(errOut) {
		t.Errorf("once's summary lacks the stopped container:\n%s", errOut)
	}
	o.assertNothingLeft(ns)
}
