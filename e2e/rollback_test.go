package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/events"
	"github.com/staticpod/staticpod/runner/revisions"
)

// versioned is pod web at version v, with a progress deadline of 5 s and a readiness
// probe that passes once /tmp/ready exists; ready says whether the version makes it.
func versioned(v string, ready bool) string {
	touch := ""
	if ready {
		touch = "touch /tmp/ready; "
	}
	return `apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {staticpod.io/progress-deadline-seconds: "5"}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + e2eImage + `
    command: [sh, -c, "trap 'exit 0' TERM; echo ` + v + `; ` + touch + `while true; do sleep 0.2; done"]
    readinessProbe:
      exec: {command: [test, -f, /tmp/ready]}
      periodSeconds: 1
`
}

// awaitReadyAs waits until pod web-node1 is served Ready through the API and check
// holds for it, and returns it.
func (n *node) awaitReadyAs(what string, check func(corev1.Pod) bool) corev1.Pod {
	n.t.Helper()
	var p corev1.Pod
	testenv.Await(n.t, what, time.Minute, func() bool {
		p = n.pods()["web-node1"]
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return check(p)
			}
		}
		return false
	})
	return p
}

// revisionContainers lists the node's containers as containers does, keyed by the pod's
// UID as well: containers keys them by pod name, container and attempt, which two
// revisions of one pod share, so there an exited container of one revision (one whose
// stop a kill -9 cut short, not yet removed) could hide the running one of the other.
func (n *node) revisionContainers() map[string]runner.Container {
	n.t.Helper()
	return n.containersBy(func(c runner.Container) string {
		return fmt.Sprintf("%s/%s/%d/%s", c.PodName, c.Name, c.Attempt, c.PodUID)
	})
}

// runningOf returns the running container of the pod of uid, if one runs.
func runningOf(cs map[string]runner.Container, uid types.UID) (runner.Container, bool) {
	for _, c := range cs {
		if c.PodUID == uid && c.State == runner.StateRunning {
			return c, true
		}
	}
	return runner.Container{}, false
}

// A new revision that never becomes Ready is rolled back to the last Ready one within
// its deadline plus a stop and a start, loudly; it stays there across a kill -9 of
// staticpod, and a later good edit runs.
func TestRevisionNeverReadyIsRolledBackAndStaysSo(t *testing.T) {
	n := newNode(t)
	sp := n.start()
	api := []string{"--api-socket", n.path("staticpod.sock")}
	n.write("web.yaml", versioned("v1", true))
	v1 := n.awaitReadyAs("v1 Ready", func(corev1.Pod) bool { return true })

	n.write("web.yaml", versioned("v2", false))
	var v2 runner.Container
	n.await("v2 running", time.Minute, func(cs map[string]runner.Container) bool {
		for _, c := range cs {
			if c.PodUID != v1.UID && c.State == runner.StateRunning {
				v2 = c
				return true
			}
		}
		return false
	})
	if v2.StartedAt.IsZero() { // not listed yet: the moment it was seen running bounds it
		v2.StartedAt = time.Now()
	}
	back := n.awaitReadyAs("v1 Ready again, rolled back from v2", func(p corev1.Pod) bool {
		return p.UID == v1.UID && p.Annotations[manifests.AnnotationRolledBackFrom] == string(v2.PodUID)
	})
	cs := n.revisionContainers()
	again, ok := runningOf(cs, v1.UID)
	if !ok {
		t.Fatalf("v1 Ready but no container of it runs: %v", summary(cs))
	}
	if again.StartedAt.IsZero() {
		again.StartedAt = time.Now()
	}
	took := again.StartedAt.Sub(v2.StartedAt)
	t.Logf("v2 started %s, v1 started again %s: %v (deadline 5s, grace 2s)", v2.StartedAt.Format(time.StampMilli), again.StartedAt.Format(time.StampMilli), took.Round(time.Millisecond))
	if took > 5*time.Second+10*time.Second {
		t.Errorf("v1 ran again %v after v2 started; want within its 5s deadline plus a stop and a start", took)
	}
	if _, ok := runningOf(cs, v2.PodUID); ok {
		t.Errorf("v2 still runs beside v1: %v", summary(cs))
	}
	if reason := back.Annotations[manifests.AnnotationRollbackReason]; reason != "was not Ready within 5s of its containers starting" {
		t.Errorf("rollback reason %q", reason)
	}
	ev := n.awaitEvent(revisions.ReasonRolledBack, revisions.Short(v2.PodUID))
	if ev.Type != events.Warning || ev.UID != v1.UID {
		t.Errorf("RolledBack event %+v, want a Warning on v1", ev)
	}
	n.awaitMetric("staticpod_pod_rollbacks_total 1")
	awaitPS(t, api, "web", "1/1", "Running (rolled back)")

	// kill -9 after the rollback: v1 keeps running, adopted, and v2 does not come back.
	sp.kill9()
	n.start()
	n.awaitRelists(5)
	n.awaitRelists(uint64(7*time.Second/e2eRelist) + 5) // past v2's deadline, had it started again
	cs = n.revisionContainers()
	if now, ok := runningOf(cs, v1.UID); !ok || now.ID != again.ID {
		t.Errorf("after a kill -9 v1's container is %v (%v), want %s adopted as it ran", now.ID, summary(cs), again.ID)
	}
	for _, c := range cs {
		if c.PodUID == v2.PodUID && c.StartedAt.After(again.StartedAt) {
			t.Errorf("v2 started again after the rollback: %v", c)
		}
	}
	if p := n.pods()["web-node1"]; p.UID != v1.UID || p.Annotations[manifests.AnnotationRolledBackFrom] != string(v2.PodUID) {
		t.Errorf("after a kill -9 the API serves %s (%v), want v1 rolled back from v2", p.UID, p.Annotations)
	}

	// A later good edit runs.
	n.write("web.yaml", versioned("v3", true))
	v3 := n.awaitReadyAs("v3 Ready", func(p corev1.Pod) bool { return p.UID != v1.UID && p.UID != v2.PodUID })
	if from, ok := v3.Annotations[manifests.AnnotationRolledBackFrom]; ok {
		t.Errorf("v3 served as rolled back from %s", from)
	}
	n.removeAndAwaitGone("web.yaml")
}

// A kill -9 of staticpod in the middle of a rollback, and one while the new revision
// is still within its deadline: the restarted staticpod ends on the last Ready
// revision, once, and stays there.
func TestRollbackSurvivesAKill9DuringIt(t *testing.T) {
	for _, tt := range []struct {
		name   string
		rolled bool // killed as its log says it rolled back, else as soon as v2 runs
	}{{"while rolling back", true}, {"before the deadline", false}} {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t)
			sp := n.start()
			n.write("web.yaml", versioned("v1", true))
			v1 := n.awaitReadyAs("v1 Ready", func(corev1.Pod) bool { return true })
			n.write("web.yaml", versioned("v2", false))
			if tt.rolled {
				sp.awaitLog(`msg="pod rolled back"`)
			} else {
				n.await("v2 running", time.Minute, func(cs map[string]runner.Container) bool {
					for _, c := range cs {
						if c.PodUID != v1.UID && c.State == runner.StateRunning {
							return true
						}
					}
					return false
				})
			}
			sp.kill9()
			n.start()
			back := n.awaitReadyAs("v1 Ready again after the restart", func(p corev1.Pod) bool {
				return p.UID == v1.UID && p.Annotations[manifests.AnnotationRolledBackFrom] != ""
			})
			cs := n.revisionContainers()
			first, ok := runningOf(cs, v1.UID)
			if !ok {
				t.Fatalf("v1 Ready but no container of it runs: %v", summary(cs))
			}
			n.awaitRelists(uint64(7*time.Second/e2eRelist) + 5) // past v2's deadline, had it started again
			cs = n.revisionContainers()
			if now, ok := runningOf(cs, v1.UID); !ok || now.ID != first.ID {
				t.Errorf("v1's container is %v (%v), want %s running on", now.ID, summary(cs), first.ID)
			}
			if _, ok := runningOf(cs, types.UID(back.Annotations[manifests.AnnotationRolledBackFrom])); ok {
				t.Errorf("v2 runs again: %v", summary(cs))
			}
			n.removeAndAwaitGone("web.yaml")
		})
	}
}
