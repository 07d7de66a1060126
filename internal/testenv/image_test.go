package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/identifiers"
	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestBuildImageIsDeterministic(t *testing.T) {
	opts := ImageOptions{Ref: "example.com/busybox:det", Files: map[string]File{"a": {Content: []byte("x")}}}
	first := mustBuildImage(t, opts)
	if second := mustBuildImage(t, opts); !bytes.Equal(first, second) {
		t.Error("BuildImage gave different archives for the same options")
	}
}

func TestBuildImageLayout(t *testing.T) {
	const ref = "example.com/busybox:layout"
	blobs := readTar(t, mustBuildImage(t, ImageOptions{
		Ref:   ref,
		Env:   []string{"A=1", "PATH=/bin", "A=2"},
		Files: map[string]File{"/etc/extra.txt": {Content: []byte("extra"), Mode: 0o600}, "opt/app/run": {Content: []byte("#!/bin/sh\n"), Mode: 0o755}},
	}))
	var index ocispec.Index
	mustUnmarshal(t, blobs["index.json"].data, &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("index holds %d manifests, want 1", len(index.Manifests))
	}
	desc := index.Manifests[0]
	for _, key := range []string{ocispec.AnnotationRefName, images.AnnotationImageName} {
		if got := desc.Annotations[key]; got != ref {
			t.Errorf("annotation %s = %q, want %q", key, got, ref)
		}
	}
	var manifest ocispec.Manifest
	mustUnmarshal(t, blob(t, blobs, desc.Digest), &manifest)
	var config ocispec.Image
	mustUnmarshal(t, blob(t, blobs, manifest.Config.Digest), &config)
	wantConfig := ocispec.ImageConfig{Env: []string{"PATH=/bin", "A=2"}, Cmd: []string{"sh"}}
	if diff := cmp.Diff(wantConfig, config.Config); diff != "" {
		t.Errorf("image config (-want +got):\n%s", diff)
	}

	zr, err := gzip.NewReader(bytes.NewReader(blob(t, blobs, manifest.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := config.RootFS.DiffIDs, []digest.Digest{digest.FromBytes(layer)}; !cmp.Equal(got, want) {
		t.Errorf("diff IDs = %v, want %v", got, want)
	}
	assertLayerEntries(t, readTar(t, layer))
}

func assertLayerEntries(t *testing.T, entries map[string]tarEntry) {
	t.Helper()
	want := map[string]struct {
		mode fs.FileMode
		link string
		data string
	}{
		"tmp/":          {mode: 0o777 | fs.ModeSticky},
		"bin/busybox":   {mode: 0o755},
		"bin/sh":        {mode: 0o777, link: "busybox"},
		"bin/wget":      {mode: 0o777, link: "busybox"},
		"etc/extra.txt": {mode: 0o600, data: "extra"},
		"opt/":          {mode: 0o755},
		"opt/app/run":   {mode: 0o755, data: "#!/bin/sh\n"},
		"etc/passwd":    {mode: 0o644, data: "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"},
		"etc/group":     {mode: 0o644, data: "root:x:0:\nnobody:x:65534:\n"},
		"root/":         {mode: 0o700},
		"proc/":         {mode: 0o555},
		"bin/":          {mode: 0o755},
		"var/":          {mode: 0o755},
		"etc/":          {mode: 0o755},
		"dev/":          {mode: 0o755},
		"sys/":          {mode: 0o555},
		"usr/":          {mode: 0o755},
		"opt/app/":      {mode: 0o755},
	}
	for name, w := range want {
		e, ok := entries[name]
		switch {
		case !ok:
			t.Errorf("layer has no %s", name)
		case e.hdr.FileInfo().Mode().Perm()|e.hdr.FileInfo().Mode()&fs.ModeSticky != w.mode:
			t.Errorf("%s mode = %v, want %v", name, e.hdr.FileInfo().Mode(), w.mode)
		case e.hdr.Linkname != w.link:
			t.Errorf("%s links to %q, want %q", name, e.hdr.Linkname, w.link)
		case w.data != "" && string(e.data) != w.data:
			t.Errorf("%s holds %q, want %q", name, e.data, w.data)
		case !e.hdr.ModTime.Equal(epoch) || e.hdr.Uid != 0 || e.hdr.Gid != 0:
			t.Errorf("%s has time %v, owner %d:%d; want %v, 0:0", name, e.hdr.ModTime, e.hdr.Uid, e.hdr.Gid, epoch)
		}
	}
}

func TestNamespaceForIsValid(t *testing.T) {
	for _, name := range []string{"TestX", "TestStop/daemon-crashed=true", "Test__odd//name--", "/", strings.Repeat("TestLong", 20)} {
		ns := namespaceFor(name)
		if err := identifiers.Validate(ns); err != nil {
			t.Errorf("namespaceFor(%q) = %q: %v", name, ns, err)
		}
		if ns == namespaceFor(name) {
			t.Errorf("namespaceFor(%q) gave %q twice, want a random suffix", name, ns)
		}
	}
}

func mustBuildImage(t *testing.T, opts ImageOptions) []byte {
	t.Helper()
	archive, err := BuildImage(opts)
	if err != nil {
		skipOrFatal(t, err)
	}
	return archive
}

type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

func readTar(t *testing.T, data []byte) map[string]tarEntry {
	t.Helper()
	entries := map[string]tarEntry{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return entries
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", hdr.Name, err)
		}
		if _, dup := entries[hdr.Name]; dup {
			t.Errorf("tar holds %s twice", hdr.Name)
		}
		entries[hdr.Name] = tarEntry{hdr: hdr, data: content}
	}
}

func blob(t *testing.T, entries map[string]tarEntry, d digest.Digest) []byte {
	t.Helper()
	e, ok := entries["blobs/sha256/"+d.Encoded()]
	if !ok {
		t.Fatalf("archive has no blob %s", d)
	}
	if got := digest.FromBytes(e.data); got != d {
		t.Fatalf("blob %s has digest %s", d, got)
	}
	return e.data
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
}
