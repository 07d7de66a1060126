package containerdrt

import (
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

const mib = 1 << 20

// bigImage is a busybox test image holding size bytes of random data, which neither
// gzip nor anything else shrinks: its content and its unpacked layer take that much
// room each, and no other image shares them.
func bigImage(ref string, size int) testenv.ImageOptions {
	data := make([]byte, size)
	rand.Read(data)
	return testenv.ImageOptions{Ref: ref, Files: map[string]testenv.File{"data": {Content: data}}}
}

// newSmallRootRuntime returns a Runtime on a containerd of its own whose root is a
// tmpfs of size bytes, and a context in its namespace.
func newSmallRootRuntime(t *testing.T, size int64, opts ...func(*Config)) (*testenv.Daemon, *Runtime, context.Context) {
	t.Helper()
	d := testenv.StartWith(t, testenv.DaemonOptions{RootSize: size})
	ns := d.Namespace(t)
	ctx := d.Context(t, ns)
	cfg := Config{
		Address: d.Address, Namespace: ns, RootDir: t.TempDir(), PodLogDir: t.TempDir(), Self: testBinary(t),
		FIFODir: d.FIFODir(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return d, r, ctx
}

// TestImageStoreOnSmallRoot measures, lists and removes images on a containerd whose
// root is a small tmpfs: ImageFS is that tmpfs, ListImages gives one entry per image
// with every name and its size, and RemoveImage returns once the space is free.
func TestImageStoreOnSmallRoot(t *testing.T) {
	d, r, ctx := newSmallRootRuntime(t, 64*mib)
	empty, err := r.ImageFS(ctx)
	if err != nil {
		t.Fatalf("ImageFS: %v", err)
	}
	if !strings.HasPrefix(empty.Path, d.Root()+"/") || empty.Capacity != 64*mib {
		t.Fatalf("ImageFS = %+v, want the 64 MiB tmpfs at %s", empty, d.Root())
	}
	start := time.Now().Add(-time.Second)
	d.MustImportImage(t, d.Namespace(t), bigImage("example.com/elsewhere:1", 1)) // another namespace: not listed
	a := d.MustImportImage(t, r.cfg.Namespace, bigImage("example.com/big:a", 4*mib))
	if _, err := d.Client.ImageService().Create(ctx, ctrimages.Image{Name: "example.com/big:alias", Target: a.Target()}); err != nil {
		t.Fatal(err)
	}
	d.MustImportImage(t, r.cfg.Namespace, bigImage("example.com/big:b", 4*mib))
	full, err := r.ImageFS(ctx)
	if err != nil {
		t.Fatalf("ImageFS: %v", err)
	}
	if grew := empty.Available - full.Available; grew < 16*mib {
		t.Errorf("two 4 MiB images, content and unpacked, took %d bytes; want at least 16 MiB", grew)
	}

	list, err := r.ListImages(ctx)
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	var names [][]string
	for _, img := range list {
		names = append(names, img.Names)
		if img.Size < 4*mib || img.Size > 6*mib {
			t.Errorf("image %v: size %d, want about 4 MiB and a busybox", img.Names, img.Size)
		}
		if img.Created.Before(start) || img.Pinned || !strings.HasPrefix(img.ID, "sha256:") || len(img.Digests) != 1 {
			t.Errorf("image %+v: want created since the test started, unpinned, with its config digest and one manifest digest", img)
		}
	}
	if diff := cmp.Diff([][]string{{"example.com/big:a", "example.com/big:alias"}, {"example.com/big:b"}}, names); diff != "" {
		t.Fatalf("ListImages names (-want +got):\n%s", diff)
	}

	if err := r.RemoveImage(ctx, list[0]); err != nil {
		t.Fatalf("RemoveImage: %v", err)
	}
	after, err := r.ImageFS(ctx)
	if err != nil {
		t.Fatalf("ImageFS: %v", err)
	}
	t.Logf("%s: %d bytes; two 4 MiB images took %d, removing one freed %d", after.Path, after.Capacity, empty.Available-full.Available, after.Available-full.Available)
	if freed := after.Available - full.Available; freed < 8*mib {
		t.Errorf("RemoveImage of a 4 MiB image freed %d bytes at once; want its content and its layer, 8 MiB or more", freed)
	}
	if list, err = r.ListImages(ctx); err != nil || len(list) != 1 || list[0].Names[0] != "example.com/big:b" {
		t.Errorf("ListImages after RemoveImage = %+v, %v; want big:b alone", list, err)
	}
	if err := r.RemoveImage(ctx, runner.StoredImage{Names: []string{"example.com/big:a"}}); err != nil {
		t.Errorf("RemoveImage of an image already gone = %v, want nil", err)
	}
	if got := r.ImageName("busybox"); got != "docker.io/library/busybox:latest" {
		t.Errorf(`ImageName("busybox") = %q`, got)
	}
}

// TestImageDirPinsItsImages checks that images an archive of the image dir brings are
// pinned while the archive is there, and only then; also for a staticpod that has not
// imported the archive itself (one whose import failed on a full disk, say).
func TestImageDirPinsItsImages(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "big.tar")
	if err := testenv.WriteImageArchive(archive, bigImage("example.com/pinned:1", mib)); err != nil {
		t.Fatal(err)
	}
	var cfg Config
	d, r, ctx := newSmallRootRuntime(t, 32*mib, func(c *Config) { c.Images.ImageDir = dir; cfg = *c })
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Images().Run(runCtx, nil) }()
	defer func() { cancel(); <-done }()
	<-r.Images().Imported()
	d.MustImportImage(t, cfg.Namespace, bigImage("example.com/unpinned:1", 1))
	pinned := func(r *Runtime) map[string]bool {
		list, err := r.ListImages(ctx)
		if err != nil {
			t.Fatalf("ListImages: %v", err)
		}
		out := map[string]bool{}
		for _, img := range list {
			out[img.Names[0]] = img.Pinned
		}
		return out
	}
	want := map[string]bool{"example.com/pinned:1": true, "example.com/unpinned:1": false}
	if diff := cmp.Diff(want, pinned(r)); diff != "" {
		t.Fatalf("pinned (-want +got):\n%s", diff)
	}
	restarted, err := New(ctx, cfg) // has imported nothing: the image's label says where it came from
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	if diff := cmp.Diff(want, pinned(restarted)); diff != "" {
		t.Fatalf("pinned, by a staticpod that did not import the archive (-want +got):\n%s", diff)
	}
	if err := os.Remove(archive); err != nil {
		t.Fatal(err)
	}
	testenv.Await(t, "the image of a removed archive to be unpinned", 10*time.Second, func() bool {
		return !pinned(r)["example.com/pinned:1"]
	})
	if pinned(restarted)["example.com/pinned:1"] {
		t.Error("the image of a removed archive is pinned for a staticpod that did not import it")
	}
}
