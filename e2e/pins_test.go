package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/staticpod/staticpod/runner"
)

// The namespaces staticpod pins for pods with their own network go with their pods,
// whatever happened meanwhile: staticpod killed with -9 before a pod was removed,
// containerd's records of the pods lost, a reboot (mounts and processes gone). None is
// left mounted in any process's mount namespace.
func TestPinsDoNotLeak(t *testing.T) {
	t.Run("a pod removed while staticpod was down", func(t *testing.T) {
		n := newNode(t)
		sp := n.start()
		n.write("a.yaml", podManifest("a", "Always", "sleep 3600"))
		n.write("b.yaml", podManifest("b", "Always", "sleep 3600"))
		n.await("both pods running", time.Minute, bothRunning)
		before := n.pins()
		if len(before) != 2 {
			t.Fatalf("pins of two pods: %v, want two", before)
		}
		sp.kill9()
		if err := os.Remove(filepath.Join(n.manifests, "b.yaml")); err != nil {
			t.Fatal(err)
		}
		n.start()
		n.await("b gone, a running", time.Minute, func(cs map[string]runner.Container) bool {
			return len(cs) == 1 && running("a-node1/main/0")(cs)
		})
		n.awaitPins(1)
		n.assertUnmounted(slices.DeleteFunc(slices.Clone(before), func(p string) bool { return slices.Contains(n.pins(), p) }))
		n.removeAllAndCheck(before)
	})

	t.Run("containerd's records lost", func(t *testing.T) {
		n := newNode(t)
		sp := n.start()
		n.write("a.yaml", podManifest("a", "Always", "sleep 3600"))
		n.await("the pod running", time.Minute, running("a-node1/main/0"))
		before := n.pins()
		old := netnsOf(t, before[0])
		sp.kill9()
		n.forgetAll()
		n.start()
		n.await("the pod running anew", time.Minute, running("a-node1/main/0"))
		n.awaitPins(1)
		// The new sandbox has the old one's ID (attempt 0 again), and new namespaces.
		if now := netnsOf(t, n.pins()[0]); now == old {
			t.Fatalf("the pod's network namespace is the one pinned before containerd lost its records (%d): the orphan pins were kept", old)
		}
		n.removeAllAndCheck(before)
	})

	t.Run("a reboot", func(t *testing.T) {
		n := newNode(t)
		sp := n.start()
		n.write("a.yaml", podManifest("a", "Always", "sleep 3600"))
		// Its start recorded: a container that stopped before any staticpod recorded its
		// start reads as never run, and is made again under its attempt.
		cs := n.await("the pod running, its start recorded", time.Minute, func(cs map[string]runner.Container) bool {
			return running("a-node1/main/0")(cs) && !cs["a-node1/main/0"].StartedAt.IsZero()
		})
		before := n.pins()
		sp.kill9()
		// What a reboot leaves of the pod: its records, empty pin files.
		syscall.Kill(int(cs["a-node1/main/0"].PID), syscall.SIGKILL)
		for _, p := range before {
			for _, ns := range []string{"net", "ipc", "uts"} {
				if err := syscall.Unmount(filepath.Join(p, ns), syscall.MNT_DETACH); err != nil {
					t.Fatal(err)
				}
			}
		}
		n.start()
		n.await("the pod running in a new sandbox", time.Minute, running("a-node1/main/1"))
		n.awaitPins(1)
		n.removeAllAndCheck(before)
	})
}

func bothRunning(cs map[string]runner.Container) bool {
	return running("a-node1/main/0")(cs) && running("b-node1/main/0")(cs)
}

// pins are the pin directories of the node's sandboxes: in its run dir, then in its
// root dir (where a staticpod before the run dir pinned them), each sorted.
func (n *node) pins() []string {
	n.t.Helper()
	var dirs []string
	for _, pattern := range []string{"root/run/namespaces/*", "root/namespaces/*"} {
		found, err := filepath.Glob(n.path(pattern))
		if err != nil {
			n.t.Fatal(err)
		}
		dirs = append(dirs, found...)
	}
	return dirs
}

// awaitPins waits until the node has count pin directories.
func (n *node) awaitPins(count int) {
	n.t.Helper()
	n.await(fmt.Sprintf("pins of %d sandboxes", count), 30*time.Second, func(map[string]runner.Container) bool {
		return len(n.pins()) == count
	})
}

// assertUnmounted fails if any process has a mount under one of dirs.
func (n *node) assertUnmounted(dirs []string) {
	n.t.Helper()
	infos, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, path := range infos {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the process is gone
		}
		for _, dir := range dirs {
			if strings.Contains(string(data), " "+dir+"/") {
				n.t.Errorf("%s still mounts pins under %s", path, dir)
			}
		}
	}
}

// removeAllAndCheck removes every manifest and checks that the pods' pins go, and
// that none of earlier (pins seen before) is mounted anywhere.
func (n *node) removeAllAndCheck(earlier []string) {
	n.t.Helper()
	seen := append(n.pins(), earlier...)
	entries, err := os.ReadDir(n.manifests)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, e := range entries {
		os.Remove(filepath.Join(n.manifests, e.Name()))
	}
	n.await("every pod gone", time.Minute, func(cs map[string]runner.Container) bool { return len(cs) == 0 })
	n.awaitPins(0)
	n.assertUnmounted(seen)
}

// forgetAll makes containerd forget the node's containers and tasks behind
// staticpod's back, as a loss of its records would.
func (n *node) forgetAll() {
	n.t.Helper()
	cs, err := n.d.Client.Containers(n.ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, c := range cs {
		if task, err := c.Task(n.ctx, nil); err == nil {
			if _, err := task.Delete(n.ctx, client.WithProcessKill); err != nil {
				n.t.Fatal(err)
			}
		}
		if err := c.Delete(n.ctx, client.WithSnapshotCleanup); err != nil {
			n.t.Fatal(err)
		}
	}
}

// netnsOf is the network namespace pinned in dir, by inode.
func netnsOf(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "net"), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}
