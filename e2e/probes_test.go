package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

func TestReadinessProbeFollowsHTTP(t *testing.T) {
	p := startInProcess(t, newNode(t))
	p.apply(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: httpd
    image: ` + e2eImage + `
    command: ["sh", "-c", "mkdir -p /www && echo ok > /www/ready && exec httpd -f -p 8080 -h /www"]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /ready, port: http}
      periodSeconds: 1
      failureThreshold: 2
`)
	pod := p.awaitPod("web-node1", "Ready", time.Minute, func(pod *corev1.Pod) bool {
		return condition(pod, corev1.PodReady) == corev1.ConditionTrue
	})
	id := strings.TrimPrefix(containerStatus(pod, "httpd").ContainerID, "containerd://")
	if code, err := p.rt.Exec(p.n.ctx, id, runner.ExecRequest{Command: []string{"rm", "/www/ready"}}); err != nil || code != 0 {
		t.Fatalf("rm in the container: %d, %v", code, err)
	}
	removed := time.Now()
	p.awaitPod("web-node1", "unready", time.Minute, func(pod *corev1.Pod) bool {
		return condition(pod, corev1.PodReady) == corev1.ConditionFalse && !containerStatus(pod, "httpd").Ready
	})
	// failureThreshold x periodSeconds, plus one period of phase and a relist.
	if took := time.Since(removed); took > 2*time.Second+time.Second+time.Second {
		t.Errorf("unready %v after the page went, want within failureThreshold x periodSeconds (2s) and a period", took)
	}
}

func TestLivenessProbeRestarts(t *testing.T) {
	n := newNode(t)
	runs := probeRuns(t, n)
	p := startInProcess(t, n)
	p.apply(`apiVersion: v1
kind: Pod
metadata: {name: live}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: probes, hostPath: {path: ` + filepath.Dir(runs) + `}}]
  containers:
  - name: app
    image: ` + e2eImage + `
    command: ["sh", "-c", "touch /tmp/alive; trap 'exit 0' TERM; while true; do sleep 0.1; done"]
    volumeMounts: [{name: probes, mountPath: /probes}]
    livenessProbe:
      exec: {command: [sh, -c, "echo ran >> /probes/` + filepath.Base(runs) + `; test -e /tmp/alive"]}
      periodSeconds: 1
      failureThreshold: 1
`)
	pod := p.awaitPod("live-node1", "running", time.Minute, func(pod *corev1.Pod) bool {
		return containerStatus(pod, "app").State.Running != nil
	})
	id := strings.TrimPrefix(containerStatus(pod, "app").ContainerID, "containerd://")
	// Two passing probes, and relists after them to act on their results: a healthy
	// container must not restart.
	awaitProbeRuns(t, runs, 2)
	p.awaitRelists(2)
	if got := containerStatus(p.pod("live-node1"), "app").RestartCount; got != 0 {
		t.Fatalf("a healthy container restarted %d times", got)
	}
	if _, err := p.rt.Exec(p.n.ctx, id, runner.ExecRequest{Command: []string{"rm", "/tmp/alive"}}); err != nil {
		t.Fatal(err)
	}
	pod = p.awaitPod("live-node1", "restarted", time.Minute, func(pod *corev1.Pod) bool {
		cs := containerStatus(pod, "app")
		return cs.RestartCount == 1 && cs.State.Running != nil
	})
	last := containerStatus(pod, "app").LastTerminationState.Terminated
	if last == nil || !strings.Contains(last.Message, "Liveness probe failed") {
		t.Errorf("last state = %+v, want the liveness failure as its reason", last)
	}
}

func TestStartupProbeProtectsSlowStarters(t *testing.T) {
	n := newNode(t)
	runs := probeRuns(t, n)
	p := startInProcess(t, n)
	p.apply(`apiVersion: v1
kind: Pod
metadata: {name: slow}
spec:
  volumes: [{name: probes, hostPath: {path: ` + filepath.Dir(runs) + `}}]
  containers:
  - name: app
    image: ` + e2eImage + `
    command: ["sh", "-c", "sleep 4; touch /tmp/up; exec sleep 3600"]
    volumeMounts: [{name: probes, mountPath: /probes}]
    startupProbe:
      exec: {command: [test, -e, /tmp/up]}
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      exec: {command: [sh, -c, "echo ran >> /probes/` + filepath.Base(runs) + `; test -e /tmp/up"]}
      periodSeconds: 1
      failureThreshold: 1
`)
	pod := p.awaitPod("slow-node1", "started", time.Minute, func(pod *corev1.Pod) bool {
		cs := containerStatus(pod, "app")
		return cs.Started != nil && *cs.Started
	})
	if n := containerStatus(pod, "app").RestartCount; n != 0 {
		t.Errorf("a slow starter restarted %d times: liveness ran before the startup probe passed", n)
	}
	// The liveness probe takes over: two of its runs, and relists after them.
	awaitProbeRuns(t, runs, 2)
	p.awaitRelists(2)
	if n := containerStatus(p.pod("slow-node1"), "app").RestartCount; n != 0 {
		t.Errorf("restarted %d times after starting", n)
	}
}

// probeRuns returns the file, in a directory of its own under the node, where a probe
// command appends a line each time it runs (through a hostPath volume).
func probeRuns(t *testing.T, n *node) string {
	t.Helper()
	dir := n.path("probes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "runs")
}

// awaitProbeRuns waits until the probe that appends to the file at path has run count times.
func awaitProbeRuns(t *testing.T, path string, count int) {
	t.Helper()
	testenv.Await(t, fmt.Sprintf("%d runs of the probe", count), time.Minute, func() bool {
		return strings.Count(readFile(path), "\n") >= count
	})
}

func TestInitContainersSidecarsAndHooks(t *testing.T) {
	n := newNode(t)
	host := n.path("host")
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startInProcess(t, n)
	p.apply(`apiVersion: v1
kind: Pod
metadata: {name: ordered}
spec:
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: first
    image: ` + e2eImage + `
    command: ["sh", "-c", "echo first >> /host/order"]
    volumeMounts: [{name: host, mountPath: /host}]
  - name: sidecar
    image: ` + e2eImage + `
    restartPolicy: Always
    command: ["sh", "-c", "echo sidecar >> /host/order; trap 'echo sidecar-stopped >> /host/order; exit 0' TERM; while true; do sleep 0.1; done"]
    volumeMounts: [{name: host, mountPath: /host}]
  - name: second
    image: ` + e2eImage + `
    command: ["sh", "-c", "echo second >> /host/order"]
    volumeMounts: [{name: host, mountPath: /host}]
  containers:
  - name: app
    image: ` + e2eImage + `
    command: ["sh", "-c", "echo app >> /host/order; trap 'test -e /host/prestop && echo prestop-seen >> /host/order; echo app-stopped >> /host/order; exit 0' TERM; while true; do sleep 0.1; done"]
    volumeMounts: [{name: host, mountPath: /host}]
    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "echo poststart >> /host/order"]}
      preStop:
        exec: {command: ["touch", "/host/prestop"]}
  volumes:
  - name: host
    hostPath: {path: ` + host + `}
`)
	pod := p.awaitPod("ordered-node1", "running", time.Minute, func(pod *corev1.Pod) bool {
		return pod.Status.Phase == corev1.PodRunning && containerStatus(pod, "app").State.Running != nil
	})
	order, _ := os.ReadFile(host + "/order")
	if got := strings.Fields(string(order)); strings.Join(got, " ") != "first sidecar second app poststart" {
		t.Errorf("order = %v, want init containers in order, the sidecar beside them, then the app and its postStart", got)
	}

	if containerStatus(pod, "first").State.Terminated == nil {
		t.Errorf("first init container: %+v, want terminated", containerStatus(pod, "first").State)
	}
	sidecar := n.containers()["ordered-node1/sidecar/0"]
	if err := syscall.Kill(int(sidecar.PID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.awaitPod("ordered-node1", "sidecar restarted", time.Minute, func(pod *corev1.Pod) bool {
		cs := containerStatus(pod, "sidecar")
		return cs.RestartCount == 1 && cs.State.Running != nil
	})

	p.apply() // the manifest is removed
	awaitFile(t, host+"/order", "sidecar-stopped")
	got := strings.Fields(readFile(host + "/order"))
	tail := strings.Join(got[len(got)-3:], " ")
	if tail != "prestop-seen app-stopped sidecar-stopped" {
		t.Errorf("shutdown order = %v; want the preStop hook seen before the app's signal, then the sidecar stopped last", got)
	}
}

func TestGracePeriodBeforeKill(t *testing.T) {
	p := startInProcess(t, newNode(t))
	p.apply(`apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 3
  containers:
  - name: app
    image: ` + e2eImage + `
    command: ["sh", "-c", "trap '' TERM; echo ignoring TERM; while true; do sleep 0.1; done"]
`)
	p.awaitPod("stubborn-node1", "running", time.Minute, func(pod *corev1.Pod) bool {
		return containerStatus(pod, "app").State.Running != nil
	})
	awaitFile(t, p.n.containers()["stubborn-node1/app/0"].LogPath, "stdout F ignoring TERM") // the trap is set
	start := time.Now()
	p.apply()
	p.n.await("the container gone", time.Minute, func(cs map[string]runner.Container) bool { return len(cs) == 0 })
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("a container that ignores SIGTERM was gone after %v, before its 3 s grace period", took)
	}
}

func readFile(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}
