package containerdrt

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// userNSPod is a pod with hostUsers: false that sleeps, with an emptyDir at /data and
// the ConfigMap "settings" at /config; spec adds to its spec.
func userNSPod(t *testing.T, name, spec string) *corev1.Pod {
	t.Helper()
	return loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+name+"}\nspec:\n  hostUsers: false\n"+spec+
		"  volumes: [{name: data, emptyDir: {}}, {name: config, configMap: {name: settings}}]\n"+
		"  containers:\n  - {name: c, image: "+testImage+", command: [sleep, '3600'], volumeMounts: [{name: data, mountPath: /data}, {name: config, mountPath: /config}]}\n")
}

func settingsObjects() manifests.Objects {
	objs := manifests.NewObjects()
	objs.Add([]*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"}, Data: map[string]string{"key": "value"}}}, nil)
	return objs
}

// searchableRootDir gives a runtime a root dir that all may search, as staticpod's
// default is (0755), unlike t.TempDir's: runc mounts a sandbox process's root from
// there inside the pod's user namespace.
func searchableRootDir(t *testing.T) func(*Config) {
	dir, err := os.MkdirTemp("", "staticpod-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return func(c *Config) { c.RootDir = dir }
}

// mustExec runs command in container id and returns its output; it fails the test
// unless the command exits 0.
func (r *testRuntime) mustExec(t *testing.T, id string, command string) string {
	t.Helper()
	var out, errOut strings.Builder
	code, err := r.Exec(r.ctx, id, runner.ExecRequest{Command: []string{"sh", "-c", command}, Stdout: &out, Stderr: &errOut})
	if err != nil || code != 0 {
		t.Fatalf("exec %q = %d, %v: %s%s", command, code, err, out.String(), errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// hostOwner is the owner of path as the host sees it.
func hostOwner(t *testing.T, path string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}

// uidMap is a container's /proc/self/uid_map as "inside host length", and the host ID.
func (r *testRuntime) uidMap(t *testing.T, id string) (string, uint64) {
	t.Helper()
	fields := strings.Fields(r.mustExec(t, id, "cat /proc/self/uid_map"))
	if len(fields) != 3 {
		t.Fatalf("uid_map = %q, want one mapping", fields)
	}
	host, _ := strconv.ParseUint(fields[1], 10, 32)
	return strings.Join(fields, " "), host
}

// TestUserNamespacePodMapsItsIDs checks that a pod with hostUsers: false runs in a user
// namespace of its own that maps 65536 IDs from 0 to a block of the host's above the
// first, whether its sandbox is pinned namespaces or a process (shareProcessNamespace);
// that root inside is that block's first ID outside, and owns the image's files, the
// emptyDir, the configMap's files and the /etc files staticpod writes, which it can
// write; and that two pods get disjoint blocks. A restarted runtime keeps the running
// pods' blocks and gives a new pod another one.
func TestUserNamespacePodMapsItsIDs(t *testing.T) {
	for _, tt := range []struct{ name, spec string }{
		{"pinned namespaces", ""},
		{"sandbox process", "  shareProcessNamespace: true\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRuntime(t, searchableRootDir(t))
			a := r.mustRunPodWith(t, userNSPod(t, "first", tt.spec), settingsObjects())["c"]
			b := r.mustRunPodWith(t, userNSPod(t, "second", tt.spec), settingsObjects())["c"]
			a = r.awaitState(t, a.ID, runner.StateRunning)
			b = r.awaitState(t, b.ID, runner.StateRunning)
			mapA, hostA := r.uidMap(t, a.ID)
			mapB, hostB := r.uidMap(t, b.ID)
			want := fmt.Sprintf("0 %d 65536", hostA)
			if hostA < 65536 || hostA%65536 != 0 || mapA != want {
				t.Errorf("uid_map of the first pod = %q, want 65536 IDs from 0 to a block above the host's first", mapA)
			}
			if hostB < 65536 || hostB%65536 != 0 || hostB == hostA {
				t.Errorf("uid_map of the second pod = %q, the first's %q: want another block", mapB, mapA)
			}
			if gid := r.mustExec(t, a.ID, "cat /proc/self/gid_map | tr -s ' ' | sed 's/^ //'"); gid != want {
				t.Errorf("gid_map = %q, want %q", gid, want)
			}
			if id := r.mustExec(t, a.ID, "id -u; id -g"); id != "0\n0" {
				t.Errorf("id -u; id -g = %q, want root", id)
			}
			// Everything root would own without the namespace, root owns inside, and can write.
			owners := r.mustExec(t, a.ID, "touch /data/made /etc/hosts /etc/hostname /etc/resolv.conf /dev/termination-log && "+
				"stat -c %u:%g /bin/busybox /data /data/made /config/key /etc/hosts /etc/resolv.conf /dev/termination-log && stat -Lc %u:%g /config/key")
			if got := strings.Fields(owners); strings.Join(got, " ") != strings.Repeat("0:0 ", 7)+"0:0" {
				t.Errorf("owners inside = %q, want root for the image's file, the emptyDir and a file made in it, the configMap's file and link, the /etc files and the termination log", got)
			}
			root := fmt.Sprintf("/proc/%d/root", a.PID)
			mapped := fmt.Sprintf("%d:%d", hostA, hostA)
			for _, p := range []string{"/bin/busybox", "/data", "/data/made"} {
				if got := hostOwner(t, root+p); got != mapped {
					t.Errorf("the host sees %s owned by %s, want the pod's block %s", p, got, mapped)
				}
			}

			again, err := New(r.ctx, r.cfg) // a restarted staticpod
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { again.Close() }) // after the cleanups of the pod it runs
			restarted := &testRuntime{Runtime: again, cfg: r.cfg, ctx: r.ctx}
			if m, _ := restarted.uidMap(t, a.ID); m != mapA {
				t.Errorf("after a restart, the running pod's uid_map = %q, want %q", m, mapA)
			}
			third := restarted.mustRunPodWith(t, userNSPod(t, "third", tt.spec), settingsObjects())["c"]
			restarted.awaitState(t, third.ID, runner.StateRunning)
			if m, host := restarted.uidMap(t, third.ID); host == hostA || host == hostB {
				t.Errorf("after a restart, a new pod got %q, a block the running pods have (%q, %q)", m, mapA, mapB)
			}
		})
	}
}

// TestProcMountUnmaskedHasNoMasks checks that a container with procMount: Unmasked sees
// /proc without the masked and read-only paths (no /dev/null bound over /proc/keys,
// /proc/sys not read-only), while its pod's default container has them. (/proc/keys
// rather than the kcore of the kubelet's docs: this host's kernel has no /proc/kcore.)
func TestProcMountUnmaskedHasNoMasks(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: unmasked}\nspec:\n  hostUsers: false\n  containers:\n"+
		"  - {name: masked, image: "+testImage+", command: [sleep, '3600']}\n"+
		"  - {name: open, image: "+testImage+", command: [sleep, '3600'], securityContext: {procMount: Unmasked}}\n")
	cs := r.mustRunPod(t, pod)
	masks := func(name string) string {
		id := r.awaitState(t, cs[name].ID, runner.StateRunning).ID
		return r.mustExec(t, id, "awk '$5 == \"/proc/keys\" || $5 == \"/proc/sys\" {print $5}' /proc/self/mountinfo | sort | tr '\\n' ' '")
	}
	if got := masks("masked"); got != "/proc/keys /proc/sys" {
		t.Errorf("default procMount: masked and read-only mounts = %q, want /proc/keys and /proc/sys", got)
	}
	if got := masks("open"); got != "" {
		t.Errorf("procMount Unmasked: masked and read-only mounts = %q, want none", got)
	}
}
