package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/runner"
)

// uidMapOf is the uid_map of process pid, its fields joined by single spaces.
func uidMapOf(t *testing.T, pid uint32) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(data)), " ")
}

// TestUserNamespacesKeptAcrossKill9 checks that pods with hostUsers: false keep running
// untouched, in their user namespaces, when staticpod is killed and started again, and
// that the restarted staticpod gives a new such pod a block of IDs neither of them has.
func TestUserNamespacesKeptAcrossKill9(t *testing.T) {
	n := newNode(t)
	sp := n.start()
	userns := "  hostUsers: false\n"
	n.write("first.yaml", podManifest("first", "Always", "sleep 3600", userns))
	n.write("second.yaml", podManifest("second", "Always", "sleep 3600", userns))
	before := n.await("pods running", time.Minute, func(cs map[string]runner.Container) bool {
		return running("first-node1/main/0")(cs) && running("second-node1/main/0")(cs)
	})
	maps := map[string]string{}
	for _, key := range []string{"first-node1/main/0", "second-node1/main/0"} {
		maps[key] = uidMapOf(t, before[key].PID)
		if f := strings.Fields(maps[key]); len(f) != 3 || f[0] != "0" || f[1] == "0" || f[2] != "65536" {
			t.Fatalf("%s: uid_map %q, want 65536 IDs from 0 to a block of the host's above the first", key, maps[key])
		}
	}
	if maps["first-node1/main/0"] == maps["second-node1/main/0"] {
		t.Fatalf("two pods share the mapping %q", maps["first-node1/main/0"])
	}
	sp.kill9()

	sp = n.start()
	sp.awaitLog("staticpod started")
	n.awaitRelists(3) // the runner converges within 2 relists: watch a third
	after := n.containers()
	for key, m := range maps {
		if after[key].PID != before[key].PID || after[key].State != runner.StateRunning {
			t.Errorf("%s: pid %d -> %d (%s); an adopted container must keep running untouched", key, before[key].PID, after[key].PID, after[key].State)
			continue
		}
		if got := uidMapOf(t, after[key].PID); got != m {
			t.Errorf("%s: uid_map %q after the restart, was %q", key, got, m)
		}
	}
	n.write("third.yaml", podManifest("third", "Always", "sleep 3600", userns))
	third := n.await("a third pod running", time.Minute, running("third-node1/main/0"))["third-node1/main/0"]
	got := uidMapOf(t, third.PID)
	for key, m := range maps {
		if got == m {
			t.Errorf("the pod started after the restart got %q, %s's mapping", got, key)
		}
	}
}
