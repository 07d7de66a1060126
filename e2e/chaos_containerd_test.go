package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// containerdOutage is how long the long outage keeps containerd down.
const containerdOutage = 30 * time.Second

// containerd restarted under running pods, then stopped for 30 s and started again:
// the tasks run on in their shims meanwhile, staticpod stays up and answers, and once
// containerd is back it picks up where it was, restarting nothing that is healthy (the
// same processes, no new attempt) and running the pod written while containerd was away.
func TestChaosContainerdRestartedAndStoppedUnderRunningPods(t *testing.T) {
	d := testenv.Start(t) // its own: the test stops it
	n := newNodeOn(t, d)
	sp := n.start()
	loop := "trap 'exit 0' TERM; while true; do sleep 0.1; done"
	n.write("web.yaml", podManifest("web", "Always", loop))
	n.write("host.yaml", podManifest("host", "Always", loop, "  hostNetwork: true\n"))
	n.await("both pods running", time.Minute, func(cs map[string]runner.Container) bool {
		return running("web-node1/main/0")(cs) && running("host-node1/main/0")(cs)
	})
	// And staticpod heard that they started: a start whose answer a restart of
	// containerd cuts off is a start that failed, to staticpod, whatever containerd did.
	n.awaitPhase("web-node1", corev1.PodRunning)
	n.awaitPhase("host-node1", corev1.PodRunning)
	before := taskPIDs(t, d, n.ns)
	t.Logf("tasks before: %v", before)

	for i, down := range []time.Duration{0, containerdOutage} {
		if err := d.Halt(); err != nil {
			t.Fatalf("stop containerd: %v", err)
		}
		stopped := time.Now()
		for id, pid := range before {
			if err := syscall.Kill(pid, 0); err != nil {
				t.Errorf("task %s (pid %d) died with containerd: %v", id, pid, err)
			}
		}
		added := fmt.Sprintf("added%d", i)
		n.write(added+".yaml", podManifest(added, "Always", loop, "  hostNetwork: true\n"))
		if down > 0 {
			// staticpod rides the outage out: it runs on and its API answers.
			for time.Since(stopped) < down {
				select {
				case <-sp.exited:
					t.Fatalf("staticpod exited while containerd was down")
				case <-time.After(time.Second):
				}
				if code, _ := n.apiGet("/pods"); code != http.StatusOK {
					t.Fatalf("GET /pods = %d while containerd is down", code)
				}
			}
		}
		if err := d.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
		resumed := time.Now()
		n.await(added+" running after containerd came back", time.Minute, running(added+"-node1/main/0"))
		t.Logf("down %v: staticpod ran the pod written meanwhile %v after containerd came back",
			down, time.Since(resumed).Round(time.Millisecond))
		n.awaitRelists(5)
		after := taskPIDs(t, d, n.ns)
		for id, pid := range before {
			if after[id] != pid {
				t.Errorf("down %v: task %s was pid %d, is %d after containerd came back: a healthy container was restarted", down, id, pid, after[id])
			}
		}
		cs := n.containers()
		for _, key := range []string{"web-node1/main/0", "host-node1/main/0"} {
			if cs[key].State != runner.StateRunning {
				t.Errorf("down %v: %s is %s, want running", down, key, cs[key].State)
			}
		}
		for key := range cs {
			if !strings.HasSuffix(key, "/main/0") {
				t.Errorf("down %v: %s: a new attempt after containerd came back", down, key)
			}
		}
		for name, pod := range n.pods() {
			for _, st := range pod.Status.ContainerStatuses {
				if st.RestartCount != 0 || !st.Ready {
					t.Errorf("down %v: %s/%s restarts %d, ready %v; want 0, ready", down, name, st.Name, st.RestartCount, st.Ready)
				}
			}
		}
	}
	// The outage is reported once, when it starts and when it ends, not on every relist.
	log := sp.out.String()
	if failed := strings.Count(log, `msg="relist failed"`); failed == 0 || failed > 10 {
		t.Errorf("staticpod's log has %d warnings of a failed relist, want a few for the 30 s outage", failed)
	}
	if !strings.Contains(log, `msg="relist works again"`) {
		t.Errorf("staticpod's log does not say that relisting works again")
	}
	if strings.Contains(log, "panic") {
		t.Errorf("staticpod panicked")
	}
}

// taskPIDs returns the PID of every running task in ns, by container ID.
func taskPIDs(t *testing.T, d *testenv.Daemon, ns string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), 30*time.Second)
	defer cancel()
	resp, err := d.Client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range resp.Tasks {
		if p.Status.String() == "RUNNING" {
			out[p.ID] = int(p.Pid)
		}
	}
	return out
}
