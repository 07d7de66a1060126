package shims

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeRuncState writes runc's state of container id in namespace ns under root, naming
// bundle as the container's.
func fakeRuncState(t *testing.T, root, ns, id, bundle string) {
	t.Helper()
	dir := filepath.Join(root, ns, id)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	state := `{"id":"` + id + `","config":{"labels":["bundle=` + bundle + `"]}}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A lost shim's bundle is made again where runc's state says it was, in the
// namespace's directory of containerd's state dir, and removed after; a bundle outside
// such a directory, or in one that someone but root may write, is neither made nor
// removed.
func TestRestoreBundle(t *testing.T) {
	runc, state := t.TempDir(), t.TempDir()
	nsDir := filepath.Join(state, taskBundles, "ns")
	if err := os.MkdirAll(nsDir, 0o711); err != nil {
		t.Fatal(err)
	}
	const id = "web_c_0_1"
	fakeRuncState(t, runc, "ns", id, filepath.Join(nsDir, id))
	done, err := RestoreBundle(runc, "ns", id)
	if err != nil {
		t.Fatalf("RestoreBundle: %v", err)
	}
	if st, err := os.Lstat(filepath.Join(nsDir, id)); err != nil || !st.IsDir() {
		t.Fatalf("the bundle was not made again: %v", err)
	}
	done()
	if _, err := os.Lstat(filepath.Join(nsDir, id)); !os.IsNotExist(err) {
		t.Fatalf("the bundle made again was left: %v", err)
	}

	victim := t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(t.TempDir(), taskBundles, "ns")
	if err := os.MkdirAll(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777) // under the umask
	for name, bundle := range map[string]string{
		"not a bundle path":         filepath.Join(victim, id),
		"another container's":       filepath.Join(nsDir, "other_c_0_1"),
		"another namespace's":       filepath.Join(state, taskBundles, "other", id),
		"a directory anyone writes": filepath.Join(open, id),
		"not clean":                 nsDir + "/../ns/" + id,
	} {
		fakeRuncState(t, runc, "ns", id, bundle)
		if _, err := RestoreBundle(runc, "ns", id); err == nil {
			t.Errorf("%s: RestoreBundle of %s made it", name, bundle)
		}
	}
	if _, err := RestoreBundle(runc, "ns", "../../etc"); err == nil {
		t.Error("RestoreBundle of a container ID that is a path made it")
	}
	if entries, _ := os.ReadDir(open); len(entries) != 0 {
		t.Errorf("made %v in a directory anyone writes", entries)
	}
	if _, err := os.Stat(filepath.Join(victim, "marker")); err != nil {
		t.Errorf("the marker outside the state dir: %v", err)
	}
}
