package e2e

import (
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/bench"
)

// Killing the container of a pod that has a network of its own restarts it in the
// shim the pod already has: no shim starts and none exits.
func TestContainerRestartKeepsThePodsShim(t *testing.T) {
	n := newNode(t)
	n.start()
	n.write("web.yaml", podManifest("web", "Always", "sleep 3600"))
	first := n.await("the pod running", time.Minute, running("web-node1/main/0"))["web-node1/main/0"]
	before := n.shimPIDs()
	if len(before) == 0 {
		t.Fatalf("no shim of namespace %s found in /proc", n.ns)
	}
	if err := syscall.Kill(int(first.PID), syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", first.ID, err)
	}
	n.await("the container restarted", time.Minute, running("web-node1/main/1"))
	if after := n.shimPIDs(); !maps.Equal(after, before) {
		t.Errorf("shims %v before the restart, %v after; want the same", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
}

// shimPIDs returns the node's running shims.
func (n *node) shimPIDs() map[int]bool {
	n.t.Helper()
	procs, err := bench.Processes()
	if err != nil {
		n.t.Fatal(err)
	}
	return bench.Shims(procs, n.d.Address, n.ns)
}
