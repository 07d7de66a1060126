package watcher

import (
	"os"
	"path/filepath"
	"testing"
)

// A scan with a cache decodes only the files whose content changed, and hands out
// copies: what a scan does to its snapshot never reaches the next one.
func TestScanDecodesOnlyChangedFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(pod(name, "busybox:1")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := newLoads("n")
	first, err := scan([]string{dir}, "n", cache)
	if err != nil || cache.decoded != 3 || len(first.Files) != 3 {
		t.Fatalf("first scan: %d files, %d decoded (err %v), want 3 and 3", len(first.Files), cache.decoded, err)
	}
	first.Files[0].Result.Pods[0].Spec.Containers[0].Image = "changed:by-the-caller"
	second, err := scan([]string{dir}, "n", cache)
	if err != nil || cache.decoded != 3 {
		t.Fatalf("second scan of unchanged files decoded %d in all (err %v), want still 3", cache.decoded, err)
	}
	if got := second.Files[0].Result.Pods[0].Spec.Containers[0].Image; got != "busybox:1" {
		t.Fatalf("a change to the first scan's pod reached the second: image %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(pod("b", "busybox:2")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	third, err := scan([]string{dir}, "n", cache)
	if err != nil || cache.decoded != 4 || len(third.Files) != 2 || len(cache.files) != 2 {
		t.Fatalf("after one edit and one removal: %d files, %d decoded in all, %d cached (err %v); want 2, 4, 2", len(third.Files), cache.decoded, len(cache.files), err)
	}
	if got := third.Files[1].Result.Pods[0].Spec.Containers[0].Image; got != "busybox:2" {
		t.Fatalf("the edited file's pod has image %q, want busybox:2", got)
	}
}
