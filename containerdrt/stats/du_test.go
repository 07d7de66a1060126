package stats

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// blocks is the bytes the files at paths occupy, from their own stat.
func blocks(t *testing.T, paths ...string) uint64 {
	t.Helper()
	var n uint64
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		n += uint64(st.Blocks) * 512
	}
	return n
}

func TestDuCountsBlocksAndInodesOnceAndStaysInTheTree(t *testing.T) {
	tests := []struct {
		name       string
		make       func(t *testing.T, dir string) []string // the inodes du must count, the top dir apart
		wantInodes uint64
	}{
		{"empty dir counts itself", func(*testing.T, string) []string { return nil }, 1},
		{"a file's allocated blocks", func(t *testing.T, dir string) []string {
			p := filepath.Join(dir, "data")
			must(t, os.WriteFile(p, bytes.Repeat([]byte{1}, 1<<20), 0o644))
			return []string{p}
		}, 2},
		{"a hard link counted once", func(t *testing.T, dir string) []string {
			p := filepath.Join(dir, "data")
			must(t, os.WriteFile(p, bytes.Repeat([]byte{1}, 64<<10), 0o644))
			must(t, os.Link(p, filepath.Join(dir, "again")))
			return []string{p}
		}, 2},
		{"a sparse file counts what it holds, not its size", func(t *testing.T, dir string) []string {
			p := filepath.Join(dir, "sparse")
			f, err := os.Create(p)
			must(t, err)
			must(t, f.Truncate(1<<30))
			must(t, f.Close())
			return []string{p}
		}, 2},
		{"a symlink counts itself, never its target", func(t *testing.T, dir string) []string {
			target := filepath.Join(t.TempDir(), "big")
			must(t, os.WriteFile(target, bytes.Repeat([]byte{1}, 1<<20), 0o644))
			p := filepath.Join(dir, "link")
			must(t, os.Symlink(target, p))
			return []string{p}
		}, 2},
		{"subdirectories and their files", func(t *testing.T, dir string) []string {
			sub := filepath.Join(dir, "a", "b")
			must(t, os.MkdirAll(sub, 0o755))
			p := filepath.Join(sub, "f")
			must(t, os.WriteFile(p, []byte("x"), 0o644))
			return []string{filepath.Join(dir, "a"), sub, p}
		}, 4},
		{"a filesystem mounted inside is not walked", func(t *testing.T, dir string) []string {
			mnt := filepath.Join(dir, "mnt")
			must(t, os.Mkdir(mnt, 0o755))
			must(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=4m"))
			t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
			must(t, os.WriteFile(filepath.Join(mnt, "f"), bytes.Repeat([]byte{1}, 1<<20), 0o644))
			return nil // the mount point's inode is the tmpfs's
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			counted := tt.make(t, dir)
			got, err := Du(dir)
			if err != nil {
				t.Fatal(err)
			}
			want := DiskUsage{Bytes: blocks(t, append([]string{dir}, counted...)...), Inodes: tt.wantInodes}
			if got != want {
				t.Fatalf("Du = %+v, want %+v", got, want)
			}
		})
	}
}

func TestDuOfAMissingDirFails(t *testing.T) {
	if _, err := Du(filepath.Join(t.TempDir(), "gone")); err == nil {
		t.Fatal("Du of a missing dir: no error")
	}
}

func TestStatFsMeasuresTheFilesystemHoldingThePath(t *testing.T) {
	dir := t.TempDir()
	must(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=8m"))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	must(t, os.WriteFile(filepath.Join(dir, "f"), bytes.Repeat([]byte{1}, 1<<20), 0o644))
	info, err := StatFs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Capacity != 8<<20 || info.Used != 1<<20 || info.Available != 7<<20 || info.Inodes == 0 || info.InodesFree >= info.Inodes {
		t.Fatalf("StatFs of an 8 MiB tmpfs holding 1 MiB = %+v", info)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
