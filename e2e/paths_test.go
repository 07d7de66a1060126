package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/internal/testenv"
)

// validate and once load several paths with the daemon's one loader, as the files of one
// directory: a ConfigMap, or a pod, that two paths define is refused in the later path's
// file by both, with the same words, and a pod may read the objects of every path.
func TestValidateAndOnceAgreeOnObjectsInTwoPaths(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	config := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {mode: fast}\n"
	reader := "apiVersion: v1\nkind: Pod\nmetadata: {name: reader}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: c\n    image: busybox:1.36\n" +
		"    env: [{name: MODE, valueFrom: {configMapKeyRef: {name: web, key: mode}}}]\n"
	for path, content := range map[string]string{
		filepath.Join(first, "config.yaml"):  config,
		filepath.Join(second, "config.yaml"): config,
		filepath.Join(second, "reader.yaml"): reader,
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refused := filepath.Join(second, "config.yaml") + ": ConfigMap default/web is already defined in " + filepath.Join(first, "config.yaml")
	out, code := runStaticpod(t, "validate", "--hostname-override", "n", first, second)
	if code != spcli.ExitInvalid || !strings.Contains(out, "error: "+refused) {
		t.Errorf("validate with a ConfigMap in both paths: exit %d, want %d and %q\n%s", code, spcli.ExitInvalid, refused, out)
	}
	out, code = runStaticpod(t, "once", "--hostname-override", "n", first, second)
	if code != spcli.ExitInvalid || !strings.Contains(out, "error: "+refused) || !strings.Contains(out, "nothing was run") {
		t.Errorf("once with a ConfigMap in both paths: exit %d, want %d, %q and nothing run\n%s", code, spcli.ExitInvalid, refused, out)
	}
	if err := os.Remove(filepath.Join(second, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	if out, code := runStaticpod(t, "validate", "--hostname-override", "n", first, second); code != 0 {
		t.Errorf("validate with the ConfigMap in the first path only: exit %d, want 0: the pod of the second reads it\n%s", code, out)
	}
}

// run takes its directories relative to its working directory: containerd, its shims
// and runc, which read a pod's rootfs, pinned namespaces, log path and the helper
// program from working directories of their own, get them absolute. Given as they
// were, the container's creation failed ("rootfs absolute path is required"), its log
// had no path and the sandbox's pins read as gone at each relist.
func TestRunTakesRelativeDirs(t *testing.T) {
	n := newNode(t)
	n.workDir = n.dir
	sp := n.start("--root-dir", "rel/root", "--pod-log-dir", "rel/log/pods", "--container-log-dir", "rel/log/containers")
	n.write("rel.yaml", podManifest("rel", "Always", "echo relative; sleep 3600"))
	n.awaitPhase("rel-node1", corev1.PodRunning)
	testenv.Await(t, "the container's log under the relative --pod-log-dir", 30*time.Second, func() bool {
		logs, _ := filepath.Glob(n.path("rel/log/pods/*/main/0.log"))
		if len(logs) != 1 {
			return false
		}
		b, _ := os.ReadFile(logs[0])
		return strings.Contains(string(b), "relative")
	})
	n.awaitRelists(3)
	if p := n.pods()["rel-node1"]; p.Status.Phase != corev1.PodRunning || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("pod after 3 relists: %s, %d restarts; want Running in its first sandbox", p.Status.Phase, p.Status.ContainerStatuses[0].RestartCount)
	}
	if out := sp.out.String(); strings.Contains(out, "level=WARN") {
		t.Errorf("staticpod warned:\n%s", out)
	}
}
