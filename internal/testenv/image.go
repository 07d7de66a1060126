package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// DefaultPath is the PATH of every test image, as in Docker's official images.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ImageOptions describes a busybox test image. The zero value but for Ref is a valid image
// whose default command is "sh".
type ImageOptions struct {
	Ref        string   // full reference, e.g. docker.io/library/busybox:staticpod
	Busybox    string   // static busybox to copy; default $STATICPOD_TEST_BUSYBOX or /bin/busybox
	Entrypoint []string // image entrypoint; none by default
	Cmd        []string // image command; ["sh"] when both Entrypoint and Cmd are empty
	Env        []string // KEY=value entries added to PATH, replacing a key set earlier
	WorkingDir string
	User       string
	StopSignal string
	Labels     map[string]string
	Files      map[string]File // extra files by path, e.g. "etc/extra.txt"; parents are created
}

// BuildImage returns an OCI image layout archive (oci-layout, index.json, blobs/sha256/...)
// holding one image named opts.Ref. Its layer is gzipped and has fixed times, so the same
// options and busybox always give the same digests.
func BuildImage(opts ImageOptions) ([]byte, error) {
	if opts.Ref == "" {
		return nil, fmt.Errorf("build image: no reference")
	}
	binary, applets, platform, err := readBusybox(busyboxPath(opts))
	if err != nil {
		return nil, fmt.Errorf("build image %s: %w", opts.Ref, err)
	}
	layer, err := buildLayer(binary, applets, opts.Files)
	if err != nil {
		return nil, fmt.Errorf("build image %s: %w", opts.Ref, err)
	}
	blobs, index, err := buildBlobs(opts, platform, layer)
	if err != nil {
		return nil, fmt.Errorf("build image %s: %w", opts.Ref, err)
	}
	return writeLayout(blobs, index)
}

// WriteImageArchive writes BuildImage's archive to path, replacing it atomically.
func WriteImageArchive(path string, opts ImageOptions) error {
	archive, err := BuildImage(opts)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".image-*.tar")
	if err != nil {
		return fmt.Errorf("write image archive %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write image archive %s: %w", path, err)
	}
	if _, err := tmp.Write(archive); err != nil {
		tmp.Close()
		return fmt.Errorf("write image archive %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write image archive %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write image archive %s: %w", path, err)
	}
	return nil
}

// ImportImage builds the image, imports it into namespace ns and unpacks it for the default
// snapshotter, so that containers can be created from it at once.
func ImportImage(ctx context.Context, c *client.Client, ns string, opts ImageOptions) (client.Image, error) {
	archive, err := BuildImage(opts)
	if err != nil {
		return nil, err
	}
	ctx = namespaces.WithNamespace(ctx, ns)
	imgs, err := c.Import(ctx, bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("import image %s: %w", opts.Ref, err)
	}
	for _, img := range imgs {
		if img.Name != opts.Ref {
			continue
		}
		image := client.NewImage(c, img)
		if err := image.Unpack(ctx, ""); err != nil {
			return nil, fmt.Errorf("unpack image %s: %w", opts.Ref, err)
		}
		return image, nil
	}
	return nil, fmt.Errorf("import image %s: archive held %d other images", opts.Ref, len(imgs))
}

// imageConfig returns the image's runtime configuration.
func imageConfig(opts ImageOptions) ocispec.ImageConfig {
	cmd := opts.Cmd
	if len(cmd) == 0 && len(opts.Entrypoint) == 0 {
		cmd = []string{"sh"}
	}
	return ocispec.ImageConfig{
		User:       opts.User,
		Env:        mergeEnv(append([]string{DefaultPath}, opts.Env...)),
		Entrypoint: opts.Entrypoint,
		Cmd:        cmd,
		WorkingDir: opts.WorkingDir,
		Labels:     opts.Labels,
		StopSignal: opts.StopSignal,
	}
}

// mergeEnv keeps the last entry for each key, in the order keys first appear.
func mergeEnv(env []string) []string {
	var out []string
	at := map[string]int{}
	for _, kv := range env {
		key, _, _ := strings.Cut(kv, "=")
		if i, ok := at[key]; ok {
			out[i] = kv
			continue
		}
		at[key] = len(out)
		out = append(out, kv)
	}
	return out
}

// buildBlobs returns the layer, config and manifest blobs by digest, and the index that
// names the manifest opts.Ref for both OCI tools and containerd, for the platform given
// (busybox's).
func buildBlobs(opts ImageOptions, platform ocispec.Platform, layer []byte) (map[digest.Digest][]byte, ocispec.Index, error) {
	var gz bytes.Buffer
	// BestSpeed halves the build, which tests repeat; the header has no name or time.
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if _, err := zw.Write(layer); err != nil {
		return nil, ocispec.Index{}, fmt.Errorf("compress layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, ocispec.Index{}, fmt.Errorf("compress layer: %w", err)
	}
	blobs := map[digest.Digest][]byte{}
	add := func(mediaType string, data []byte) ocispec.Descriptor {
		d := digest.FromBytes(data)
		blobs[d] = data
		return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
	}
	config, err := json.Marshal(ocispec.Image{
		Platform: platform,
		Config:   imageConfig(opts),
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(layer)}},
	})
	if err != nil {
		return nil, ocispec.Index{}, fmt.Errorf("encode config: %w", err)
	}
	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    add(ocispec.MediaTypeImageConfig, config),
		Layers:    []ocispec.Descriptor{add(ocispec.MediaTypeImageLayerGzip, gz.Bytes())},
	})
	if err != nil {
		return nil, ocispec.Index{}, fmt.Errorf("encode manifest: %w", err)
	}
	desc := add(ocispec.MediaTypeImageManifest, manifest)
	desc.Platform = &platform
	desc.Annotations = map[string]string{
		ocispec.AnnotationRefName:  opts.Ref,
		images.AnnotationImageName: opts.Ref,
	}
	index := ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{desc},
	}
	return blobs, index, nil
}

// writeLayout returns the tar of an OCI image layout holding blobs and index.
func writeLayout(blobs map[digest.Digest][]byte, index ocispec.Index) ([]byte, error) {
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return nil, fmt.Errorf("encode index: %w", err)
	}
	layout, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return nil, fmt.Errorf("encode oci-layout: %w", err)
	}
	var buf bytes.Buffer
	w := layerWriter{tw: tar.NewWriter(&buf), dirs: map[string]bool{}}
	w.file(ocispec.ImageLayoutFile, File{Content: layout})
	w.file(ocispec.ImageIndexFile, File{Content: indexJSON})
	w.dir("blobs/sha256", 0o755)
	for _, d := range slices.Sorted(maps.Keys(blobs)) {
		w.file("blobs/sha256/"+d.Encoded(), File{Content: blobs[d]})
	}
	if w.err != nil {
		return nil, fmt.Errorf("write image layout: %w", w.err)
	}
	if err := w.tw.Close(); err != nil {
		return nil, fmt.Errorf("write image layout: %w", err)
	}
	return buf.Bytes(), nil
}
