package images

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/staticpod/staticpod/internal/testenv"
)

// importWait bounds how long a test waits for the image dir to import a file.
const importWait = time.Minute

func TestImageDirImportsArchives(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	dir := t.TempDir()
	opts := imageOptionsFor(t, "")
	ociTar := mustOCIArchive(t, opts, "example.com/dir/oci:plain")
	files := map[string][]byte{
		"oci.tar":         ociTar,
		"oci.tar.gz":      gzipBytes(t, mustOCIArchive(t, opts, "example.com/dir/oci:gz")),
		"docker.tar":      mustDockerArchive(t, opts, "example.com/dir/docker:plain"),
		"docker.tgz":      gzipBytes(t, mustDockerArchive(t, opts, "dir/docker:gz")),
		"garbage.tar":     []byte("not an image archive\n"),
		".hidden.tar":     []byte("ignored\n"),
		"download.part":   []byte("ignored\n"),
		"archive.tar.gz~": []byte("ignored\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logs := &importLog{t: t}
	imgs := newStore(d.Client, Config{ImageDir: dir}, slog.New(slog.NewTextHandler(logs, nil)))

	start := time.Now()
	stop := startImageDir(t, ctx, imgs)
	awaitImages(t, ctx, imgs, "example.com/dir/oci:plain", "example.com/dir/oci:gz",
		"example.com/dir/docker:plain", "docker.io/dir/docker:gz")
	t.Logf("imported 4 archives present at start in %v", time.Since(start))

	// Added later: written in place (create, write, close), and renamed in as atomic
	// writers do.
	start = time.Now()
	late := filepath.Join(dir, "late.tar")
	if err := os.WriteFile(late, mustDockerArchive(t, opts, "example.com/dir/late:1"), 0o644); err != nil {
		t.Fatal(err)
	}
	renamedOpts := opts
	renamedOpts.Ref = "example.com/dir/renamed:1"
	if err := testenv.WriteImageArchive(filepath.Join(dir, "renamed.tar"), renamedOpts); err != nil {
		t.Fatal(err)
	}
	awaitImages(t, ctx, imgs, "example.com/dir/late:1", "example.com/dir/renamed:1")
	t.Logf("imported 2 archives added later in %v (settle time %v)", time.Since(start), importSettle)

	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil after cancel", err)
	}
	warns := logs.lines(`level=WARN msg="image archive not imported"`)
	if len(warns) != 1 || !strings.Contains(warns[0], "garbage.tar") {
		t.Errorf("import warnings = %q, want one for garbage.tar", warns)
	}
	for _, ignored := range []string{".hidden.tar", "download.part", "archive.tar.gz~"} {
		if got := logs.lines(ignored); len(got) != 0 {
			t.Errorf("log lines about %s = %q, want none (ignored)", ignored, got)
		}
	}
}

func TestImportFileReturnsNames(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	path := filepath.Join(t.TempDir(), "busybox.tgz")
	data := gzipBytes(t, mustDockerArchive(t, imageOptionsFor(t, ""), "busybox:import"))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	imgs := newStore(d.Client, Config{}, pullLogger(t))
	start := time.Now()
	names, err := imgs.importFile(ctx, path)
	t.Logf("import and unpack of a gzipped docker-archive took %v", time.Since(start))
	if err != nil || len(names) != 1 || names[0] != "docker.io/library/busybox:import" {
		t.Fatalf("importFile = %q, %v, want [docker.io/library/busybox:import]", names, err)
	}
	if out := mustRunImage(t, ctx, d, names[0], "cat", "/etc/test-name"); out != t.Name() {
		t.Errorf("container of the imported image printed %q, want %q", out, t.Name())
	}
}

func TestImageDirUnsetReturnsAtOnce(t *testing.T) {
	imgs := newStore(nil, Config{}, pullLogger(t))
	if err := imgs.Run(t.Context(), nil); err != nil {
		t.Errorf("Run without an image dir = %v, want nil", err)
	}
}

func TestIsArchiveName(t *testing.T) {
	for name, want := range map[string]bool{
		"busybox.tar": true, "busybox.tar.gz": true, "etcd.tgz": true, "image": true,
		".busybox.tar": false, ".image-123.tar": false, "busybox.tar.tmp": false,
		"busybox.tar.part": false, "busybox.tar~": false, ".busybox.tar.swp": false,
	} {
		if got := isArchiveName(name); got != want {
			t.Errorf("isArchiveName(%s) = %v, want %v", name, got, want)
		}
	}
}

func TestOCIRefName(t *testing.T) {
	for in, want := range map[string]string{
		"example.com/app:1": "example.com/app:1",
		"busybox:1.36":      "docker.io/library/busybox:1.36",
		"v1":                "", // a bare tag names no repository
		"latest":            "",
		"Bad/Name:":         "",
	} {
		if got := ociRefName(in); got != want {
			t.Errorf("ociRefName(%s) = %q, want %q", in, got, want)
		}
	}
}

// startImageDir runs imgs.Run until the returned stop is called (or t ends), and stop
// returns Run's result.
func startImageDir(t *testing.T, ctx context.Context, imgs *Store) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- imgs.Run(ctx, nil) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// awaitImages waits until every ref is present and unpacked, or fails t after importWait.
func awaitImages(t *testing.T, ctx context.Context, imgs *Store, refs ...string) {
	t.Helper()
	// Polling containerd, which has no event for this.
	testenv.Await(t, fmt.Sprintf("images %v imported and unpacked", refs), importWait, func() bool {
		for _, ref := range refs {
			img, err := imgs.client.GetImage(ctx, ref)
			if err != nil && !errdefs.IsNotFound(err) {
				t.Fatalf("get image %s: %v", ref, err)
			}
			if err != nil {
				return false
			}
			if ok, err := img.IsUnpacked(ctx, ""); !ok || err != nil {
				return false
			}
		}
		return true
	})
}

// mustOCIArchive returns testenv's OCI layout archive of the image opts describes, named ref.
func mustOCIArchive(t *testing.T, opts testenv.ImageOptions, ref string) []byte {
	t.Helper()
	opts.Ref = ref
	archive, err := testenv.BuildImage(opts)
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

// mustDockerArchive returns a docker-archive (as docker save writes) of the image opts
// describes, tagged ref.
func mustDockerArchive(t *testing.T, opts testenv.ImageOptions, ref string) []byte {
	t.Helper()
	opts.Ref = ref
	img := mustBuildGGCRImage(t, opts)
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tarball.Write(tag, img, &buf); err != nil {
		t.Fatalf("write docker-archive %s: %v", ref, err)
	}
	return buf.Bytes()
}

func gzipBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// importLog keeps the lines an images logs, and shows them in t's log.
type importLog struct {
	t   *testing.T
	buf testenv.Buffer
}

func (l *importLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return l.buf.Write(p)
}

// lines returns the lines that contain s.
func (l *importLog) lines(s string) []string {
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// An imported image is matched to pods by their image strings as containerd's CRI
// normalizes them.
func TestProvides(t *testing.T) {
	has := provides([]string{"docker.io/library/busybox:1", "registry.local:5000/app@sha256:" + strings.Repeat("a", 64)})
	for image, want := range map[string]bool{
		"busybox:1":                   true,
		"docker.io/library/busybox:1": true,
		"library/busybox:1":           true,
		"busybox":                     false, // :latest
		"busybox:2":                   false,
		"registry.local:5000/app@sha256:" + strings.Repeat("a", 64): true,
		"registry.local:5000/app":                                   false,
		"Not A Reference":                                           false,
	} {
		if got := has(image); got != want {
			t.Errorf("provides(...)(%q) = %v, want %v", image, got, want)
		}
	}
}

// A staticpod started again does not read an archive again whose images came in from
// it, unchanged since, and are all still there: it only pins them. One whose image was
// removed meanwhile, or that was replaced, is imported again.
func TestImageDirImportsAnUnchangedArchiveOnce(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	dir := t.TempDir()
	path := filepath.Join(dir, "app.tar")
	opts := imageOptionsFor(t, "")
	if err := os.WriteFile(path, mustOCIArchive(t, opts, "example.com/dir/once:1"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	// start runs a new Store over dir until its archives present at start are in, and
	// returns it and what it logged.
	start := func() (*Store, *importLog) {
		t.Helper()
		logs := &importLog{t: t}
		imgs := newStore(d.Client, Config{ImageDir: dir}, slog.New(slog.NewTextHandler(logs, nil)))
		stop := startImageDir(t, ctx, imgs)
		select {
		case <-imgs.Imported():
		case <-time.After(importWait):
			t.Fatal("the archives present at start are not in after a minute")
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		return imgs, logs
	}
	const name = "example.com/dir/once:1"
	if _, logs := start(); len(logs.lines(`msg="imported images"`)) != 1 {
		t.Fatalf("first start: imports logged %q, want one", logs.lines("imported"))
	}
	imgs, logs := start()
	if got := logs.lines(`msg="imported images"`); len(got) != 0 {
		t.Errorf("second start over the unchanged archive imported it again: %q", got)
	}
	if got := logs.lines("unchanged since it was imported"); len(got) != 1 || !strings.Contains(got[0], name) {
		t.Errorf("second start logged %q, want the archive unchanged with %s", got, name)
	}
	if !imgs.pinned(name, archive) {
		t.Errorf("image %s of the archive not imported again is not pinned", name)
	}

	if err := d.Client.ImageService().Delete(ctx, name, images.SynchronousDelete()); err != nil {
		t.Fatal(err)
	}
	if _, logs := start(); len(logs.lines(`msg="imported images"`)) != 1 {
		t.Errorf("a start after the archive's image was removed: imports logged %q, want one", logs.lines("imported"))
	}
	awaitImages(t, ctx, imgs, name)

	if err := os.WriteFile(path, mustOCIArchive(t, opts, "example.com/dir/once:2"), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute) // another version, whatever the clock's resolution
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if _, logs := start(); len(logs.lines(`msg="imported images"`)) != 1 {
		t.Errorf("a start after the archive was replaced: imports logged %q, want one", logs.lines("imported"))
	}
	awaitImages(t, ctx, imgs, "example.com/dir/once:2")
}
