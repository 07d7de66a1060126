package images

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/v2/core/snapshots"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// An image's /etc/passwd and /etc/group are copied from a view of its layers once per
// manifest digest, in the background: the first call returns at once with nothing,
// the calls after the copy return it, and a store started later finds the copy an
// earlier one made.
func TestUserFilesCopiesOncePerDigest(t *testing.T) {
	d := ctd.Daemon(t)
	ns := d.Namespace(t)
	ctx := d.Context(t, ns)
	passwd := "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n"
	i := d.MustImportImage(t, ns, testenv.ImageOptions{Ref: "example.com/users:1", Files: map[string]testenv.File{"etc/passwd": {Content: []byte(passwd)}}})
	dir := t.TempDir()
	imgs := newStore(d.Client, Config{Snapshotter: "overlayfs", UserFilesDir: dir}, pullLogger(t))
	t.Cleanup(imgs.Wait)
	img, err := imgs.Ensure(ctx, runner.PullRequest{Image: i.Name()})
	if err != nil {
		t.Fatal(err)
	}
	facts, err := imgs.Facts(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if files := imgs.UserFiles(ctx, img, facts); files != "" {
		t.Fatalf("the first UserFiles = %q, want nothing while the copy is made", files)
	}
	imgs.Wait() // the copy is made
	files := imgs.UserFiles(ctx, img, facts)
	if files == "" {
		t.Fatal("UserFiles copied nothing")
	}
	if got, err := os.ReadFile(filepath.Join(files, "etc/passwd")); err != nil || string(got) != passwd {
		t.Errorf("etc/passwd = %q, %v, want the image's %q", got, err, passwd)
	}
	if _, err := os.Stat(filepath.Join(files, "etc/group")); err != nil {
		t.Errorf("etc/group not copied: %v", err)
	}
	// Once: a later call does not copy again (it would make the directory anew).
	if err := os.RemoveAll(files); err != nil {
		t.Fatal(err)
	}
	if again := imgs.UserFiles(ctx, img, facts); again != files {
		t.Errorf("a later UserFiles = %q, want %q", again, files)
	}
	imgs.Wait()
	if _, err := os.Stat(files); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a later call copied again: %v", err)
	}
	// A later store (a restart) uses the copy it finds, at its first call and with no
	// view of the image: its snapshotter does not even exist.
	first := newStore(d.Client, Config{Snapshotter: "overlayfs", UserFilesDir: dir}, pullLogger(t))
	first.UserFiles(ctx, img, facts)
	first.Wait()
	later := newStore(d.Client, Config{Snapshotter: "no-such-snapshotter", UserFilesDir: dir}, pullLogger(t))
	if got := later.UserFiles(ctx, img, facts); got != files {
		t.Errorf("a later store's UserFiles = %q, want the copy at %q", got, files)
	}
	// And no view is left behind.
	views := 0
	err = d.Client.SnapshotService("overlayfs").Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindView {
			views++
		}
		return nil
	})
	if err != nil || views != 0 {
		t.Errorf("%d views left (%v), want none", views, err)
	}
}

// The copy reads each file as containerd's lookups do, through the image's root: a
// link within the root is followed, a file the image lacks stays missing, and a link
// out of the root fails the copy as content, so that the lookups meet it themselves.
func TestCopyUserFileSet(t *testing.T) {
	root := t.TempDir()
	podtest.WriteFile(t, filepath.Join(root, "usr/share/passwd"), "root:x:0:0::/:/bin/sh\n")
	if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../usr/share/passwd", filepath.Join(root, "etc/passwd")); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := copyUserFileSet(root, dst); err != nil {
		t.Fatalf("copyUserFileSet: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "etc/passwd")); err != nil || string(got) != "root:x:0:0::/:/bin/sh\n" {
		t.Errorf("etc/passwd = %q, %v, want the link's target", got, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "etc/group")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("etc/group of an image without one: %v, want missing", err)
	}
	if err := os.Symlink("/etc/group", filepath.Join(root, "etc/group")); err != nil {
		t.Fatal(err)
	}
	if err := copyUserFileSet(root, t.TempDir()); !errors.Is(err, errUserFileContent) {
		t.Errorf("a link out of the root: %v, want errUserFileContent", err)
	}
}
