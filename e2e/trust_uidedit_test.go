package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// An edit of a manifest that gives its metadata.uid (one copied from `kubectl get -o
// yaml`) is an update of the pod, as on the kubelet: the pod keeps its UID, its
// container whose spec changed is replaced by one running the new command (the old one
// stopped), and an edit of a label alone reaches the pod without restarting anything.
func TestEditOfAPodThatGivesItsUIDReplacesItsContainer(t *testing.T) {
	const uid = "5b9a2f0e-1c1d-4c8e-9a53-0e2c1b7d9f11"
	n := newNode(t)
	n.start()
	manifest := func(say, tier string) string {
		m := podManifest("web", "Always", "trap 'exit 0' TERM; echo "+say+"; sleep 3600 & wait")
		return strings.Replace(withUID(m, uid), "  name: web\n", "  name: web\n  labels: {tier: "+tier+"}\n", 1)
	}
	n.write("web.yaml", manifest("first", "front"))
	v1 := n.await("web running", time.Minute, running("web-node1/main/0"))["web-node1/main/0"]
	awaitFile(t, v1.LogPath, "stdout F first")
	if v1.PodUID != uid {
		t.Fatalf("the pod runs under uid %s, want the manifest's %s", v1.PodUID, uid)
	}

	n.write("web.yaml", manifest("second", "front"))
	cs := n.await("the edited command running, the old container stopped", time.Minute, func(cs map[string]runner.Container) bool {
		return running("web-node1/main/1")(cs) && cs["web-node1/main/0"].State != runner.StateRunning
	})
	v2 := cs["web-node1/main/1"]
	awaitFile(t, v2.LogPath, "stdout F second")
	if v2.PodUID != uid {
		t.Errorf("after the edit the pod runs under uid %s, want the manifest's %s still", v2.PodUID, uid)
	}
	if old, ok := cs["web-node1/main/0"]; ok && old.State != runner.StateExited {
		t.Errorf("the old container is %s, want it exited or removed", old.State)
	}
	if got := podsOf(cs, "web-node1"); len(got) > 2 {
		t.Errorf("containers of the pod: %v, want the old one and its replacement alone", got)
	}
	// /pods has the edit once the worker heard the start (the container may run a
	// moment before that), under the same UID.
	edited := "trap 'exit 0' TERM; echo second; sleep 3600 & wait"
	var pod corev1.Pod
	testenv.Await(t, "GET /pods to show the edited command", 10*time.Second, func() bool {
		pod = n.pods()["web-node1"]
		return len(pod.Spec.Containers) > 0 && len(pod.Spec.Containers[0].Command) > 2 && pod.Spec.Containers[0].Command[2] == edited
	})
	if pod.UID != types.UID(uid) {
		t.Errorf("GET /pods: uid %s, want %s", pod.UID, uid)
	}

	// A label is no part of a container's spec: the kubelet updates the pod and
	// restarts nothing.
	n.write("web.yaml", manifest("second", "back"))
	testenv.Await(t, "GET /pods to show the edited label", 30*time.Second, func() bool {
		return n.pods()["web-node1"].Labels["tier"] == "back"
	})
	n.awaitRelists(5) // each wakes the pod's worker: a restart would have begun
	now := n.containers()
	if c := now["web-node1/main/1"]; c.ID != v2.ID || c.State != runner.StateRunning {
		t.Errorf("after a label edit the container is %+v, want %s running untouched", c, v2.ID)
	}
	if _, restarted := now["web-node1/main/2"]; restarted {
		t.Errorf("a label edit restarted the container: %v", summary(now))
	}
	if pod := n.pods()["web-node1"]; containerStatus(&pod, "main").RestartCount != 1 {
		t.Errorf("restart count %d, want 1 (the command edit alone)", containerStatus(&pod, "main").RestartCount)
	}
}

// The same through the API: a pushed manifest that gives its UID, pushed again with
// another command, replaces its container under the same UID.
func TestPushedEditOfAPodThatGivesItsUIDReplacesItsContainer(t *testing.T) {
	const uid = "0c6e1f4a-7d2b-4e8f-b1a9-3c5d7e9f0a21"
	n := newNode(t)
	n.start()
	manifest := func(say string) string {
		return withUID(podManifest("pushed", "Always", "trap 'exit 0' TERM; echo "+say+"; sleep 3600 & wait"), uid)
	}
	if code, body := n.putManifest("pushed", manifest("first")); code/100 != 2 {
		t.Fatalf("push: %d %s", code, body)
	}
	v1 := n.await("the pushed pod running", time.Minute, running("pushed-node1/main/0"))["pushed-node1/main/0"]
	awaitFile(t, v1.LogPath, "stdout F first")
	if code, body := n.putManifest("pushed", manifest("second")); code/100 != 2 {
		t.Fatalf("push of the edit: %d %s", code, body)
	}
	cs := n.await("the edited command running, the old container stopped", time.Minute, func(cs map[string]runner.Container) bool {
		return running("pushed-node1/main/1")(cs) && cs["pushed-node1/main/0"].State != runner.StateRunning
	})
	v2 := cs["pushed-node1/main/1"]
	awaitFile(t, v2.LogPath, "stdout F second")
	if v1.PodUID != uid || v2.PodUID != uid {
		t.Errorf("the pod ran under uid %s, then %s; want the manifest's %s throughout", v1.PodUID, v2.PodUID, uid)
	}
}
