package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/runner"
)

// chaosGrace is the grace period of the pods whose stop staticpod is interrupted in.
const chaosGrace = 8 * time.Second

// staticpod stopped with SIGTERM while two pods are inside their grace period, one with a
// preStop hook and one without, exits at once and leaves them running; the staticpod
// started next finishes their stops within what is left of the grace period begun
// before, not a new one, and runs no hook twice.
func TestChaosSIGTERMInsideGracePeriods(t *testing.T) {
	n := newNode(t)
	shared, volume, mount := sharedDir(t, n)
	// Each container notes the stop signal and runs on: only SIGKILL, at the end of
	// the grace period, ends it.
	pod := func(name, hook string) string {
		m := mount(podManifest(name, "Always", "trap 'echo term >> /shared/"+name+"' TERM; while true; do sleep 0.1; done", volume))
		m = strings.Replace(m, "terminationGracePeriodSeconds: 2", fmt.Sprintf("terminationGracePeriodSeconds: %d", int(chaosGrace.Seconds())), 1)
		if hook != "" {
			m += "    lifecycle: {preStop: {exec: {command: [\"sh\", \"-c\", " + fmt.Sprintf("%q", hook) + "]}}}\n"
		}
		return m
	}
	n.write("plain.yaml", pod("plain", ""))
	n.write("hooked.yaml", pod("hooked", "echo prestop >> /shared/hooked; sleep 2"))
	sp := n.start()
	n.await("both pods running", time.Minute, func(cs map[string]runner.Container) bool {
		return running("plain-node1/main/0")(cs) && running("hooked-node1/main/0")(cs)
	})
	os.Remove(filepath.Join(n.manifests, "plain.yaml"))
	os.Remove(filepath.Join(n.manifests, "hooked.yaml"))
	cs := n.await("both stops begun", 30*time.Second, func(cs map[string]runner.Container) bool {
		return !cs["plain-node1/main/0"].StopDeadline.IsZero() && !cs["hooked-node1/main/0"].StopDeadline.IsZero()
	})
	awaitFile(t, filepath.Join(shared, "hooked"), "prestop\n") // the hook runs, the signal is still to come
	deadlines := map[string]time.Time{}
	for _, key := range []string{"plain-node1/main/0", "hooked-node1/main/0"} {
		deadlines[key] = cs[key].StopDeadline
	}

	term := time.Now()
	sp.stop()
	if took := time.Since(term); took > 3*time.Second {
		t.Errorf("staticpod took %v to exit on SIGTERM; want it not to wait out the grace periods", took.Round(time.Millisecond))
	}
	cs = n.containers()
	for key, deadline := range deadlines {
		if time.Now().Before(deadline) && cs[key].State != runner.StateRunning {
			t.Errorf("%s is %s after staticpod exited inside its grace period; want it left running", key, cs[key].State)
		}
	}

	n.start()
	cs = n.await("both containers gone or exited", 30*time.Second, func(cs map[string]runner.Container) bool {
		for key := range deadlines {
			if c, ok := cs[key]; ok && c.State != runner.StateExited {
				return false
			}
		}
		return true
	})
	ended := time.Now()
	for key, deadline := range deadlines {
		end := ended
		if c, ok := cs[key]; ok {
			end = c.FinishedAt
		}
		t.Logf("%s ended %v from its grace period's end", key, end.Sub(deadline).Round(time.Millisecond))
		if late := end.Sub(deadline); late > 2*time.Second {
			t.Errorf("%s ended %v after its grace period's end; want within what was left of it", key, late.Round(time.Millisecond))
		}
		if early := deadline.Sub(end); early > time.Second {
			t.Errorf("%s ended %v before its grace period's end; want it given what was left", key, early.Round(time.Millisecond))
		}
	}
	if hooks := readFile(filepath.Join(shared, "hooked")); strings.Count(hooks, "prestop") != 1 {
		t.Errorf("the preStop hook ran %d times, want once:\n%s", strings.Count(hooks, "prestop"), hooks)
	}
	for _, name := range []string{"plain", "hooked"} {
		if !strings.Contains(readFile(filepath.Join(shared, name)), "term") {
			t.Errorf("%s never got its stop signal", name)
		}
	}
	n.await("nothing left", 30*time.Second, func(cs map[string]runner.Container) bool { return len(cs) == 0 })
}
