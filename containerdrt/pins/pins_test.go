package pins

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Pinning leaves no thread of staticpod in a pod's namespaces, the main thread
// included (Go parks a locked main thread rather than ending it).
func TestPinningLeavesNoThreadInThePod(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pins")
	for range 4 { // more pins than threads are likely to be idle: the main thread gets its turn
		if err := Pin(dir, Spec{Namespaces: []Namespace{Net, UTS, IPC}, Hostname: "p"}); err != nil {
			t.Fatal(err)
		}
		pod := map[string]uint64{}
		for _, ns := range []string{"net", "uts", "ipc"} {
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(dir, ns), &st); err != nil {
				t.Fatal(err)
			}
			pod[ns] = st.Ino
		}
		tasks, _ := filepath.Glob("/proc/self/task/*/ns")
		for _, task := range tasks {
			for ns, inode := range pod {
				var st unix.Stat_t
				if unix.Stat(filepath.Join(task, ns), &st) == nil && st.Ino == inode {
					t.Errorf("thread %s is in the pod's %s namespace", filepath.Dir(task), ns)
				}
			}
		}
		if err := Unpin(dir); err != nil {
			t.Fatal(err)
		}
		if IsNamespace(filepath.Join(dir, "net")) {
			t.Error("the net pin holds after Unpin")
		}
	}
}

// A pin missing (staticpod killed while pinning) or holding nothing (a reboot) is lost;
// a directory that cannot be read for another reason is not taken for lost.
func TestPinsHeld(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pins")
	if err := Pin(dir, Spec{Namespaces: []Namespace{Net, UTS}, Hostname: "p"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unpin(dir) })
	if !Held(dir, []string{"net", "uts"}) {
		t.Error("pins just made do not hold")
	}
	if Held(dir, []string{"net", "uts", "ipc"}) {
		t.Error("a missing ipc pin is taken for held")
	}
	if err := unix.Unmount(filepath.Join(dir, "uts"), unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if Held(dir, []string{"net", "uts"}) {
		t.Error("an unmounted pin is taken for held")
	}
}
