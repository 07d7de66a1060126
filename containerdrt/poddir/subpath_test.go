package poddir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
)

// beneathTree makes a volume with a directory, a file and symlinks of every kind, and
// a directory outside it, and returns both.
func beneathTree(t *testing.T) (vol, outside string) {
	t.Helper()
	outside = t.TempDir()
	vol = t.TempDir()
	podtest.WriteFile(t, filepath.Join(outside, "marker"), "outside")
	if err := os.MkdirAll(filepath.Join(vol, "dir", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	podtest.WriteFile(t, filepath.Join(vol, "dir", "file"), "inside")
	for link, target := range map[string]string{
		"abs":          outside,         // absolute, out of the volume
		"absinside":    vol + "/dir",    // absolute, into the volume
		"rel":          "dir",           // relative, in the volume
		"dir/up":       "../..",         // relative, out by '..'
		"dir/lastlink": "file",          // the last component, to a file beside it
		"dotdot":       "dir/../../",    // relative, out through a directory
		"dir/sub/back": "../../../../.", // relative, far out
	} {
		if err := os.Symlink(target, filepath.Join(vol, link)); err != nil {
			t.Fatal(err)
		}
	}
	return vol, outside
}

// openBeneath, with openat2 and component by component, opens what lies beneath the
// volume through directories only, and refuses every symlink (absolute or relative,
// leading in or out, as the last component or on the way) and every '..' out.
func TestOpenBeneathRefusesSymlinksAndEscapes(t *testing.T) {
	vol, outside := beneathTree(t)
	opens := map[string]func(int, string) (int, error){"openat2": openat2Beneath, "openat": openatBeneath}
	for name, open := range opens {
		for _, tt := range []struct {
			rel  string
			want string // the file opened; empty: refused
		}{
			{rel: "dir", want: vol + "/dir"},
			{rel: "dir/file", want: vol + "/dir/file"},
			{rel: "dir/sub", want: vol + "/dir/sub"},
			{rel: ".", want: vol},
			{rel: "abs"},
			{rel: "abs/marker"},
			{rel: "absinside"},
			{rel: "absinside/file"},
			{rel: "rel"},
			{rel: "rel/file"},
			{rel: "dir/up"},
			{rel: "dir/up/" + filepath.Base(outside)},
			{rel: "dir/lastlink"},
			{rel: "dotdot"},
			{rel: "dir/sub/back/etc"},
			{rel: "../" + filepath.Base(outside) + "/marker"},
			{rel: "dir/../../" + filepath.Base(outside)},
			{rel: "missing"},
		} {
			f, err := openBeneathWith(vol, tt.rel, open)
			switch {
			case tt.want == "" && err == nil:
				f.Close()
				t.Errorf("%s: openBeneath(%q) opened %s, want it refused", name, tt.rel, f.Name())
			case tt.want != "" && err != nil:
				t.Errorf("%s: openBeneath(%q) = %v, want %s", name, tt.rel, err, tt.want)
			case tt.want != "":
				if at, _ := os.Readlink(fdPath(f)); !sameFile(at, tt.want) {
					t.Errorf("%s: openBeneath(%q) opened %s, want %s", name, tt.rel, at, tt.want)
				}
				f.Close()
			}
		}
	}
}

// A subPath may go through symlinks that stay in the volume, as on a kubelet; one that
// leads out is refused, whether the symlink is absolute or relative.
func TestOpenSubPathFollowsSymlinksOnlyInTheVolume(t *testing.T) {
	vol, _ := beneathTree(t)
	for _, tt := range []struct{ sub, want string }{
		{"dir", vol + "/dir"},
		{"rel/file", vol + "/dir/file"},
		{"absinside", vol + "/dir"},
		{"dir/lastlink", vol + "/dir/file"},
		{"abs", ""},
		{"dir/up", ""},
		{"dotdot", ""},
		{"dir/sub/back", ""},
	} {
		f, err := openSubPath(vol, tt.sub)
		if tt.want == "" {
			if err == nil || !strings.Contains(err.Error(), "leads outside the volume") {
				t.Errorf("openSubPath(%q) = %v, want it refused as leading outside the volume", tt.sub, err)
			}
			if f != nil {
				f.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("openSubPath(%q) = %v, want %s", tt.sub, err, tt.want)
			continue
		}
		if at, _ := os.Readlink(fdPath(f)); at != tt.want {
			t.Errorf("openSubPath(%q) opened %s, want %s", tt.sub, at, tt.want)
		}
		f.Close()
	}
}

// The mount point of a subPath holds the file opened; a second prepare (a restarted
// container or staticpod) reuses the mount, one whose subPath now names another file
// replaces it, and cleanSubPaths unmounts and removes every mount point without
// touching what they held.
func TestPrepareSubPathMountsReusesAndCleans(t *testing.T) {
	requireRoot(t)
	vol, outside := beneathTree(t)
	podDir := filepath.Join(t.TempDir(), "pod")
	t.Cleanup(func() { cleanSubPaths(podDir) })
	prepare := func(sub string, index int) string {
		t.Helper()
		target, err := prepareSubPath(podDir, "data", "app", index, vol, sub, false)
		if err != nil {
			t.Fatalf("prepareSubPath(%q): %v", sub, err)
		}
		return target
	}
	dir := prepare("dir", 0)
	if want := filepath.Join(podDir, "volume-subpaths", "data", "app", "0"); dir != want {
		t.Errorf("mount point = %s, want %s", dir, want)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "file")); string(got) != "inside" {
		t.Errorf("file through the mount point = %q, want %q", got, "inside")
	}
	file := prepare("dir/file", 1)
	if fi, err := os.Lstat(file); err != nil || !fi.Mode().IsRegular() || !sameFile(file, vol+"/dir/file") {
		t.Errorf("mount point of a file subPath: %v, %v; want a file holding dir/file", fi, err)
	}
	created := prepare("new/deeper", 2)
	if fi, err := os.Stat(filepath.Join(vol, "new/deeper")); err != nil || !fi.IsDir() || !sameFile(created, filepath.Join(vol, "new/deeper")) {
		t.Errorf("missing subPath: %v, %v; want it created and mounted", fi, err)
	}

	prepare("dir", 0)
	if n := mountCount(t, dir); n != 1 {
		t.Errorf("mounts at %s after a second prepare = %d, want the first reused", dir, n)
	}
	if err := os.Rename(filepath.Join(vol, "dir"), filepath.Join(vol, "old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(vol, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	prepare("dir", 0)
	if n := mountCount(t, dir); n != 1 || !sameFile(dir, vol+"/dir") {
		t.Errorf("after the subPath changed: %d mounts at %s, holding the new dir %v; want one holding it", n, dir, sameFile(dir, vol+"/dir"))
	}

	if _, err := prepareSubPath(podDir, "data", "app", 3, vol, "abs", false); err == nil {
		t.Error("prepareSubPath of a symlink out of the volume succeeded")
	}
	if err := cleanSubPaths(podDir); err != nil {
		t.Fatalf("cleanSubPaths: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(podDir, volumeSubpathsDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after cleanSubPaths: %v, want it gone", volumeSubpathsDir, err)
	}
	for _, f := range []string{vol + "/old/file", vol + "/new/deeper", outside + "/marker"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s after cleanSubPaths: %v, want it kept", f, err)
		}
	}
}

// TestImageSubPathIsAnExistingDirectory: the subPath of an image volume is mounted
// when it is a directory of the image, whatever symlink leads to it in the image; a
// missing one is not created (the image is read-only) and a file is refused, as
// containerd's CRI refuses both.
func TestImageSubPathIsAnExistingDirectory(t *testing.T) {
	requireRoot(t)
	vol, _ := beneathTree(t)
	podDir := filepath.Join(t.TempDir(), "pod")
	t.Cleanup(func() { cleanSubPaths(podDir) })
	for i, sub := range []string{"dir", "rel/sub"} {
		target, err := prepareSubPath(podDir, "data", "app", i, vol, sub, true)
		if err != nil {
			t.Errorf("prepareSubPath(%q) in an image: %v", sub, err)
			continue
		}
		if !sameFile(target, filepath.Join(vol, strings.Replace(sub, "rel", "dir", 1))) {
			t.Errorf("prepareSubPath(%q) in an image mounted another file", sub)
		}
	}
	for i, sub := range []string{"missing", "dir/file", "abs"} {
		if _, err := prepareSubPath(podDir, "data", "app", 10+i, vol, sub, true); err == nil {
			t.Errorf("prepareSubPath(%q) in an image succeeded, want it refused", sub)
		}
	}
	if _, err := os.Stat(filepath.Join(vol, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing subPath of an image: %v, want it left missing", err)
	}
}

// mountCount counts the mounts stacked at path.
func mountCount(t *testing.T, path string) int {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

// sameFile reports whether paths a and b name the same file, their symlinks followed.
func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
