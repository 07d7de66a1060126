package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/runner"
)

// slowToStop is a pod whose container ignores SIGTERM (it is PID 1 without a handler)
// and whose preStop hook appends a line to hooks.
func slowToStop(name, hooks string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 10
  volumes: [{name: hooks, hostPath: {path: ` + filepath.Dir(hooks) + `}}]
  containers:
  - name: main
    image: ` + e2eImage + `
    command: [sleep, "3600"]
    volumeMounts: [{name: hooks, mountPath: /hooks}]
    lifecycle:
      preStop:
        exec: {command: [sh, -c, "echo ` + name + ` >> /hooks/` + filepath.Base(hooks) + `"]}
`
}

// A pod removed while staticpod is down, or whose stop was under way when staticpod
// stopped, is stopped after the restart as its spec asked: its preStop hook runs once
// and it is killed when its own grace period ends, not the 30 s given to containers of
// unknown pods.
func TestOrphansKeepTheirGraceAndPreStopAcrossRestarts(t *testing.T) {
	n := newNode(t)
	hooks := n.path("hooks/ran")
	if err := os.MkdirAll(filepath.Dir(hooks), 0o755); err != nil {
		t.Fatal(err)
	}
	sp := n.start()
	n.write("during.yaml", slowToStop("during", hooks))
	n.write("down.yaml", slowToStop("down", hooks))
	n.await("pods running", time.Minute, func(cs map[string]runner.Container) bool {
		return running("during-node1/main/0")(cs) && running("down-node1/main/0")(cs)
	})

	// during: removed, and staticpod stopped 1.5 s into its stop.
	if err := os.Remove(filepath.Join(n.manifests, "during.yaml")); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	awaitFile(t, hooks, "during")
	time.Sleep(1500*time.Millisecond - time.Since(removed))
	sp.stop()
	// down: removed while staticpod is down.
	if err := os.Remove(filepath.Join(n.manifests, "down.yaml")); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	n.start()

	cs := n.await("both stopped", time.Minute, func(cs map[string]runner.Container) bool {
		return stopped(cs, "during-node1/main/0") && stopped(cs, "down-node1/main/0")
	})
	// Either a pod's exit is still there to read, or it is gone already: then the
	// time it was seen gone bounds its exit.
	bound := func(key string) time.Time {
		if c, ok := cs[key]; ok {
			return c.FinishedAt
		}
		return time.Now()
	}
	// The old behaviour killed them 30 s after the restart; their own grace is 10 s.
	if took := bound("during-node1/main/0").Sub(removed); took > 16*time.Second {
		t.Errorf("the pod whose stop began before the restart was killed %v after its removal; its grace period is 10 s", took.Round(time.Millisecond))
	}
	if took := bound("down-node1/main/0").Sub(restarted); took > 16*time.Second {
		t.Errorf("the pod removed while staticpod was down was killed %v after the restart; its grace period is 10 s", took.Round(time.Millisecond))
	}
	data, _ := os.ReadFile(hooks)
	if got := strings.Fields(string(data)); len(got) != 2 || strings.Count(string(data), "during") != 1 || strings.Count(string(data), "down") != 1 {
		t.Errorf("preStop hooks that ran: %q; want each pod's once", got)
	}
}

// stopped reports whether the container has exited or is gone.
func stopped(cs map[string]runner.Container, key string) bool {
	c, ok := cs[key]
	return !ok || c.State == runner.StateExited
}
