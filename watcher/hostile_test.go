package watcher

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// hostileDir holds the committed hostile manifests; hostileGolden the problems each
// must produce, with the manifest directory written $DIR.
var (
	hostileDir    = filepath.Join("..", "testdata", "manifests", "hostile")
	hostileGolden = filepath.Join("..", "testdata", "golden", "manifests", "hostile")
)

// reportCut is the end of a problem cut to its reported size.
var reportCut = regexp.MustCompile(`\.\.\. \(\d+ bytes more\)$`)

const (
	goodPod   = "apiVersion: v1\nkind: Pod\nmetadata: {name: good}\nspec: {containers: [{name: c, image: busybox:1.36}]}\n"
	victimPod = "apiVersion: v1\nkind: Pod\nmetadata: {name: victim}\nspec: {containers: [{name: c, image: busybox:1.36}]}\n"
)

// hostileRun is a directory source holding a good pod, in 00-good.yaml, and a victim
// pod in the file a hostile manifest then replaces.
type hostileRun struct {
	dir, path    string
	updates      <-chan manifests.Update
	good, victim types.UID
}

// startHostile runs the directory source on a directory with the good pod and the
// victim pod at name, and waits until it wants both.
func startHostile(t *testing.T, name string) *hostileRun {
	t.Helper()
	h := &hostileRun{dir: t.TempDir()}
	h.path = filepath.Join(h.dir, name)
	if err := os.WriteFile(filepath.Join(h.dir, "00-good.yaml"), []byte(goodPod), 0o644); err != nil {
		t.Fatal(err)
	}
	h.updates = runWatcher(t, h.dir, time.Hour)
	renameIn(t, h.path, func(tmp string) error { return os.WriteFile(tmp, []byte(victimPod), 0o644) })
	u := awaitMatch(t, h.updates, "the victim pod's file", func(u manifests.Update) bool { return len(u.Pods) == 2 })
	for _, p := range u.Pods {
		switch p.Name {
		case "good-n":
			h.good = p.UID
		case "victim-n":
			h.victim = p.UID
		}
	}
	if h.good == "" || h.victim == "" {
		t.Fatalf("pods before the hostile file: %v", names(u))
	}
	return h
}

// replace puts what make creates at the victim's path, by a rename as editors and
// deployment tools do, and returns the snapshot that reports its failure.
func (h *hostileRun) replace(t *testing.T, make func(tmp string) error) manifests.Update {
	t.Helper()
	renameIn(t, h.path, make)
	return awaitMatch(t, h.updates, "the hostile file", func(u manifests.Update) bool {
		return slices.ContainsFunc(u.Failures, func(f manifests.Failure) bool { return f.Location == h.path })
	})
}

// problems are the failure's problems for the hostile file, with the directory as $DIR.
func (h *hostileRun) problems(u manifests.Update) []string {
	var out []string
	for _, f := range u.Failures {
		if f.Location != h.path {
			continue
		}
		for _, p := range f.Problems {
			p = strings.ReplaceAll(p, h.dir, "$DIR")
			if reportCut.MatchString(p) && len(p) > 200 {
				// Where a long problem is cut depends on the length of the directory's
				// name: compare its beginning.
				p = p[:200] + "... (cut)"
			}
			out = append(out, p)
		}
	}
	return out
}

// untouched checks that the good pod is still wanted as it was, and the victim pod too
// (on its last good spec) unless the hostile file was read as valid.
func (h *hostileRun) untouched(t *testing.T, u manifests.Update, victimKept bool) {
	t.Helper()
	uids := map[types.UID]bool{}
	for _, p := range u.Pods {
		uids[p.UID] = true
	}
	if !uids[h.good] {
		t.Errorf("the good pod of another file is no longer wanted as it was: %v", names(u))
	}
	if victimKept && !uids[h.victim] {
		t.Errorf("the pod the file defined before is not kept on its last good spec: %v", names(u))
	}
}

// renameIn creates a file with make at a hidden temp name beside path, then renames it
// to path.
func renameIn(t *testing.T, path string, make func(tmp string) error) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := make(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// awaitMatch returns the first snapshot for which ok holds, failing after a deadline.
func awaitMatch(t *testing.T, updates <-chan manifests.Update, what string, ok func(manifests.Update) bool) manifests.Update {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case u := <-updates:
			if ok(u) {
				return u
			}
		case <-deadline:
			t.Fatalf("no matching snapshot after %s", what)
		}
	}
}

// Every hostile manifest of testdata is refused through the real directory source with
// the problems its golden file lists, each naming the file (and, where there is one,
// the field), and leaves the other file's pod untouched and the pod it replaced on its
// last good spec.
func TestHostileManifests(t *testing.T) {
	entries, err := os.ReadDir(hostileDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 50 {
		t.Fatalf("%d hostile manifests in %s, want at least 50", len(entries), hostileDir)
	}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(hostileDir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			h := startHostile(t, e.Name())
			u := h.replace(t, func(tmp string) error { return os.WriteFile(tmp, data, 0o644) })
			got := h.problems(u)
			for _, p := range got {
				if !strings.HasPrefix(p, "$DIR/"+e.Name()+": ") && !strings.HasPrefix(p, "$DIR/"+e.Name()+" (document ") {
					t.Errorf("a problem that does not start with the file: %q", p)
				}
			}
			// A file that only collides with another is valid: its pods are what it
			// defines now, and the victim is gone with its old content.
			collides := len(got) > 0 && strings.Contains(got[0], "is already defined in")
			h.untouched(t, u, !collides)
			compareHostileGolden(t, e.Name(), strings.Join(got, "\n")+"\n")
		})
	}
}

func compareHostileGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(hostileGolden, name+".golden")
	if *update {
		if err := os.MkdirAll(hostileGolden, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (go test ./watcher -run Hostile -update writes it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("problems of %s (-want +got):\n%s", name, diff)
	}
}

// Hostile files that cannot be committed: made by the test in the manifest directory.
// Each is refused with a precise problem (and none blocks the source: a named pipe
// with no writer is never waited on), leaving the other pods untouched.
func TestHostileFiles(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(outside, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := func(size int) func(string) error {
		return func(tmp string) error {
			head := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    a: \""
			tail := "\"\nspec: {containers: [{name: c, image: busybox:1.36}]}\n"
			return os.WriteFile(tmp, []byte(head+strings.Repeat("x", size-len(head)-len(tail))+tail), 0o644)
		}
	}
	tests := []struct {
		name string
		make func(tmp string) error
		want string // the problem, with the directory as $DIR
	}{
		{"fifo.yaml", func(tmp string) error { return syscall.Mkfifo(tmp, 0o644) },
			"$DIR/fifo.yaml: not a regular file (a named pipe)"},
		{"device.yaml", func(tmp string) error { return syscall.Mknod(tmp, syscall.S_IFCHR|0o644, 1<<8|3) }, // /dev/null's numbers
			"$DIR/device.yaml: not a regular file (a character device)"},
		{"socket.yaml", func(tmp string) error {
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
			if err == nil {
				l.SetUnlinkOnClose(false)
				t.Cleanup(func() { l.Close() })
			}
			return err
		}, "$DIR/socket.yaml: not a regular file (a socket)"},
		{"zero.yaml", func(tmp string) error { return os.Symlink("/dev/zero", tmp) },
			"$DIR/zero.yaml: not a regular file (a character device)"},
		{"outside.yaml", func(tmp string) error { return os.Symlink(outside, tmp) },
			"$DIR/outside.yaml: Invalid value: a manifest document must be a mapping (an object) with apiVersion and kind, not a string"},
		{"unreadable.yaml", func(tmp string) error { return os.Symlink("/proc/self/mem", tmp) }, // reads fail with EIO, root or not
			"read $DIR/unreadable.yaml: input/output error"},
		{"too-large.yaml", big(manifests.MaxManifestBytes + 1),
			fmt.Sprintf("$DIR/too-large.yaml: manifest file is larger than %d bytes", manifests.MaxManifestBytes)},
		{"huge-field.yaml", big(manifests.MaxManifestBytes - 1),
			"$DIR/huge-field.yaml: metadata.annotations: Too long: may not be more than 262144 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "device.yaml" && os.Geteuid() != 0 && os.Getenv("CI") != "true" {
				t.Skip("making a device file needs root")
			}
			h := startHostile(t, tt.name)
			u := h.replace(t, tt.make)
			if got := h.problems(u); !cmp.Equal(got, []string{tt.want}) {
				t.Errorf("problems = %q, want %q", got, tt.want)
			}
			h.untouched(t, u, true)
		})
	}
}
