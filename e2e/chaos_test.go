package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// sharedDir is a host directory the node's pods mount at /shared, and the volume and
// mount lines of a manifest that mounts it.
func sharedDir(t *testing.T, n *node) (dir, volume string, mount func(string) string) {
	t.Helper()
	dir = n.path("shared")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	volume = "  volumes: [{name: shared, hostPath: {path: " + dir + "}}]\n"
	mount = func(m string) string {
		return strings.Replace(m, "    command:", "    volumeMounts: [{name: shared, mountPath: /shared}]\n    command:", 1)
	}
	return dir, volume, mount
}

// A manifest rewritten 100 times a second for 10 s: staticpod converges on the last
// version, one container of it running and nothing else left, and starts far fewer
// containers than there were versions (each waits for the one before to be gone).
func TestChaosManifestRewrittenHundredTimesASecond(t *testing.T) {
	n := newNode(t)
	n.start()
	shared, volume, mount := sharedDir(t, n)
	version := func(i int) string {
		return mount(podManifest("web", "Always", fmt.Sprintf("echo v%d >> /shared/started; trap 'exit 0' TERM; while true; do sleep 0.1; done", i), volume))
	}
	n.write("web.yaml", version(0))
	n.await("the first version running", time.Minute, running("web-node1/main/0"))
	tick := time.NewTicker(10 * time.Millisecond)
	writes := 1
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); writes++ {
		<-tick.C
		n.write("web.yaml", version(writes))
	}
	tick.Stop()
	last := fmt.Sprintf("v%d", writes-1)
	awaitFile(t, filepath.Join(shared, "started"), last+"\n")
	cs := n.await("only the last version, running", time.Minute, func(cs map[string]runner.Container) bool {
		c, ok := cs["web-node1/main/0"]
		return ok && len(cs) == 1 && c.State == runner.StateRunning
	})
	data, _ := os.ReadFile(filepath.Join(shared, "started"))
	started := strings.Fields(string(data))
	t.Logf("%d versions written in 10 s; %d containers started", writes, len(started))
	if started[len(started)-1] != last {
		t.Errorf("the last container started is %s, want %s", started[len(started)-1], last)
	}
	if got := cs["web-node1/main/0"]; got.Attempt != 0 {
		t.Errorf("the last version's container is attempt %d, want 0", got.Attempt)
	}
	if len(started) > writes/10 {
		t.Errorf("%d containers started for %d versions: staticpod thrashes", len(started), writes)
	}
}

// The manifest directory moved away stops its pods, as on the kubelet (operators stop a
// control plane that way), and leaves nothing of them behind; moved back, they start
// again, one container each.
func TestChaosManifestDirectoryMovedAwayAndBack(t *testing.T) {
	n := newNode(t)
	n.start()
	n.write("etcd.yaml", podManifest("etcd", "Always", "trap 'exit 0' TERM; while true; do sleep 0.1; done"))
	n.write("apiserver.yaml", podManifest("apiserver", "Always", "trap 'exit 0' TERM; while true; do sleep 0.1; done"))
	both := func(cs map[string]runner.Container) bool {
		return len(cs) == 2 && running("etcd-node1/main/0")(cs) && running("apiserver-node1/main/0")(cs)
	}
	n.await("both pods running", time.Minute, both)
	away := n.manifests + ".away"
	if err := os.Rename(n.manifests, away); err != nil {
		t.Fatal(err)
	}
	n.await("every pod gone", time.Minute, func(cs map[string]runner.Container) bool { return len(cs) == 0 })
	for _, dir := range []string{n.path("root/pods"), n.path("root/run/pods"), n.path("root/run/namespaces"), n.path("log/pods")} {
		testenv.Await(t, dir+" empty", 10*time.Second, func() bool {
			return len(podEntries(dir)) == 0
		})
	}
	if err := os.Rename(away, n.manifests); err != nil {
		t.Fatal(err)
	}
	cs := n.await("both pods running again", time.Minute, both)
	for key, c := range cs {
		if c.Attempt != 0 {
			t.Errorf("%s: attempt %d after the directory came back, want a new pod's 0", key, c.Attempt)
		}
	}
}
