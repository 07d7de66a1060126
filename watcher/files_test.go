package watcher

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/manifests"
)

func TestIgnored(t *testing.T) {
	ignored := []string{
		".hidden.yaml", ".etcd.yaml.swp", "etcd.yaml~", "etcd.yaml.swp", "etcd.yaml.swx",
		"etcd.yaml.bak", "etcd.yaml.orig", "etcd.yaml.rej", "etcd.yaml.tmp", "#etcd.yaml#",
		"etcd.yaml.dpkg-old", "etcd.yaml.dpkg-new", "etcd.yaml.rpmnew", "etcd.yaml.rpmsave", "4913",
	}
	for _, name := range ignored {
		if !Ignored(name) {
			t.Errorf("Ignored(%q) = false, want true", name)
		}
	}
	for _, name := range []string{"etcd.yaml", "etcd.yml", "etcd.json", "etcd", "pods.list", "a#b"} {
		if Ignored(name) {
			t.Errorf("Ignored(%q) = true, want false", name)
		}
	}
}

// writeFiles creates files (name -> content) in a new temp dir and returns the dir.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestListFiles(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"b.yaml": "", "a.yaml": "", "a.yaml.swp": "", ".git/config": "", "sub/c.yaml": "", "4913": "",
	})
	if err := os.Symlink(filepath.Join(dir, "a.yaml"), filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	got, err := ListFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "link.yaml")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListFiles (-want +got):\n%s", diff)
	}

	if got, err := ListFiles(filepath.Join(dir, "missing")); err != nil || got != nil {
		t.Errorf("ListFiles(missing) = %v, %v; want no files and no error", got, err)
	}
	one := filepath.Join(dir, "b.yaml")
	if got, err := ListFiles(one); err != nil || !cmp.Equal(got, []string{one}) {
		t.Errorf("ListFiles(file) = %v, %v; want the file itself", got, err)
	}
}

func TestReadFileTooLarge(t *testing.T) {
	dir := writeFiles(t, map[string]string{"big.yaml": strings.Repeat("#", manifests.MaxManifestBytes+1)})
	_, err := ReadFile(filepath.Join(dir, "big.yaml"))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile(big) error = %v, want ErrTooLarge", err)
	}
}

const podYAML = "apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec: {containers: [{name: c, image: busybox:1.36}]}\n"

func TestScanConflicts(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": strings.Replace(podYAML, "NAME", "web", 1),
		"b.yaml": strings.Replace(podYAML, "NAME", "web", 1) + "---\n" + strings.Replace(podYAML, "NAME", "db", 1),
		"c.yaml": "kind: Nope\n",
	})
	snap, err := Scan([]string{dir}, "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := []Conflict{{Pod: "default/web-n1", Kept: filepath.Join(dir, "a.yaml"), Dropped: filepath.Join(dir, "b.yaml")}}
	if diff := cmp.Diff(want, snap.Conflicts); diff != "" {
		t.Errorf("Scan conflicts (-want +got):\n%s", diff)
	}
	var pods []string
	for _, f := range snap.Files {
		for _, p := range f.Result.Pods {
			pods = append(pods, filepath.Base(f.Path)+":"+p.Name)
		}
	}
	if diff := cmp.Diff([]string{"a.yaml:web-n1", "b.yaml:db-n1"}, pods); diff != "" {
		t.Errorf("Scan pods (-want +got):\n%s", diff)
	}
	if len(snap.Files) != 3 || !snap.Files[2].Failed() || snap.Files[0].Failed() {
		t.Errorf("Scan files = %+v, want c.yaml (only) failed", snap.Files)
	}
}

// Several paths load as their files would from one directory: path after path, a pod
// or a ConfigMap that an earlier path defines is a conflict in the later file, a file
// named twice is read once, and a pod reads the objects of every path.
func TestScanPathsAsOneDirectory(t *testing.T) {
	config := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {mode: fast}\n"
	reader := strings.Replace(podYAML, "NAME", "web", 1) + "---\n" +
		"apiVersion: v1\nkind: Pod\nmetadata: {name: reader}\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n" +
		"    env: [{name: MODE, valueFrom: {configMapKeyRef: {name: web, key: mode}}}]\n"
	a := writeFiles(t, map[string]string{"z.yaml": config + "---\n" + strings.Replace(podYAML, "NAME", "web", 1)})
	b := writeFiles(t, map[string]string{"a.yaml": config + "---\n" + reader})
	snap, err := Scan([]string{a, b, filepath.Join(a, "z.yaml")}, "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := []Conflict{
		{Pod: "default/web-n1", Kept: filepath.Join(a, "z.yaml"), Dropped: filepath.Join(b, "a.yaml")},
		{Object: "ConfigMap default/web", Kept: filepath.Join(a, "z.yaml"), Dropped: filepath.Join(b, "a.yaml")},
	}
	if diff := cmp.Diff(want, snap.Conflicts); diff != "" {
		t.Errorf("Scan conflicts (-want +got):\n%s", diff)
	}
	var pods []string
	for _, f := range snap.Files {
		for _, p := range f.Result.Pods {
			pods = append(pods, f.Path+":"+p.Name)
		}
		if f.Failed() {
			t.Errorf("%s failed: %v %v; the pod of the second path reads the ConfigMap of the first", f.Path, f.ReadErr, f.Result.Errors)
		}
	}
	if diff := cmp.Diff([]string{filepath.Join(a, "z.yaml") + ":web-n1", filepath.Join(b, "a.yaml") + ":reader-n1"}, pods); diff != "" {
		t.Errorf("Scan pods (-want +got):\n%s", diff)
	}
}
