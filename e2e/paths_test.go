package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	spcli "github.com/staticpod/staticpod/cli"
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
