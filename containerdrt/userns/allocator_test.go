package userns

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustGet(t *testing.T, a *Allocator, uid string) Mapping {
	t.Helper()
	m, err := a.Get(uid)
	if err != nil {
		t.Fatalf("Get(%s): %v", uid, err)
	}
	return m
}

func TestPodsGetDisjointBlocksAboveTheHosts(t *testing.T) {
	a := New(t.TempDir())
	first, second := mustGet(t, a, "a"), mustGet(t, a, "b")
	if first.HostID != Length || second.HostID != 2*Length {
		t.Errorf("Get(a), Get(b) = %d, %d, want %d, %d", first.HostID, second.HostID, Length, 2*Length)
	}
	if again := mustGet(t, a, "a"); again != first {
		t.Errorf("Get(a) again = %d, want %d", again.HostID, first.HostID)
	}
}

func TestRestartedAllocatorKeepsEveryPodsBlock(t *testing.T) {
	dir := t.TempDir()
	a := New(dir)
	first, second := mustGet(t, a, "a"), mustGet(t, a, "b")
	if err := a.Release("a"); err != nil {
		t.Fatal(err)
	}
	third := mustGet(t, a, "c") // takes a's freed block
	if third != first {
		t.Errorf("Get(c) after Release(a) = %d, want the freed %d", third.HostID, first.HostID)
	}
	restarted := New(dir)
	if m := mustGet(t, restarted, "b"); m != second {
		t.Errorf("after a restart, Get(b) = %d, want %d", m.HostID, second.HostID)
	}
	if m := mustGet(t, restarted, "c"); m != third {
		t.Errorf("after a restart, Get(c) = %d, want %d", m.HostID, third.HostID)
	}
	if m := mustGet(t, restarted, "d"); m.HostID != 3*Length {
		t.Errorf("after a restart, a new pod got %d, want the free %d", m.HostID, 3*Length)
	}
}

func TestBadOrConflictingFilesStopAllocation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"not json", map[string]string{"a": "{"}, "read user namespace of pod a"},
		{"host block", map[string]string{"a": `{"uidMappings":[{"hostId":0,"containerId":0,"length":65536}],"gidMappings":[{"hostId":0,"containerId":0,"length":65536}]}`}, "above the first"},
		{"one block twice", map[string]string{
			"a": `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`,
			"b": `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`,
		}, "are pod a's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for uid, body := range tc.files {
				if err := os.MkdirAll(filepath.Join(dir, uid), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, uid, File), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := New(dir).Get("new")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Get(new) = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestAllocatorRefusesPathsAsUIDs(t *testing.T) {
	for _, uid := range []string{"", ".", "..", "a/b"} {
		if _, err := New(t.TempDir()).Get(uid); err == nil {
			t.Errorf("Get(%q) succeeded", uid)
		}
	}
}
