package once

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two manifests of one UID run nothing: their pods would share a directory, and the
// second would never run beside the first.
func TestLoadPodsRefusesTwoPodsOfOneUID(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a", "b"} {
		manifest := "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", uid: 3f5b3a0e-8a3c-4f57-9d7e-2b8e0c1d9a11}\nspec: {restartPolicy: Never, containers: [{name: c, image: busybox:1.36}]}\n"
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	pods, _, err := loadPods(&out, []string{dir}, "n")
	want := filepath.Join(dir, "b.yaml") + ": metadata.uid: Duplicate value"
	if err == nil || len(pods) != 0 || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), filepath.Join(dir, "a.yaml")) {
		t.Errorf("loadPods = %d pods, %v; output:\n%s\nwant nothing run and %q naming a.yaml", len(pods), err, out.String(), want)
	}
}
