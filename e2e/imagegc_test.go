package e2e

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

const mebibyte = 1 << 20

// newSmallImageFSNode is newNode on a containerd of its own whose root, and so its
// image filesystem, is a tmpfs of size bytes.
func newSmallImageFSNode(t *testing.T, size int64) *node {
	t.Helper()
	d := testenv.StartWith(t, testenv.DaemonOptions{RootSize: size})
	ns := d.Namespace(t)
	n := &node{t: t, d: d, ns: ns, dir: t.TempDir(), ctx: d.Context(t, ns)}
	t.Cleanup(func() { unmountUnder(t, n.dir) })
	n.manifests = n.path("manifests")
	if err := os.MkdirAll(n.manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	d.MustImportImage(t, ns, testenv.ImageOptions{Ref: e2eImage})
	rt, err := containerdrt.New(n.ctx, containerdrt.Config{
		Address: d.Address, Namespace: ns, RootDir: n.path("observer"), PodLogDir: n.path("log/pods"), Self: binary,
		Observe: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	n.rt = rt
	return n
}

// bigImage is a test image with size bytes of random data: content and unpacked layer
// of that size each, shared with no other image.
func bigImage(ref string, size int) testenv.ImageOptions {
	data := make([]byte, size)
	rand.Read(data)
	return testenv.ImageOptions{Ref: ref, Files: map[string]testenv.File{"data": {Content: data}}}
}

// imageNames returns the names of the node's images.
func (n *node) imageNames() map[string]bool {
	n.t.Helper()
	list, err := n.rt.ListImages(n.ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, img := range list {
		for _, name := range img.Names {
			out[name] = true
		}
	}
	return out
}

// TestImageGCFreesDownToTheLowThreshold fills a node's image filesystem (a 96 MiB tmpfs)
// past --image-gc-high-threshold with unused images, and checks that the daemon removes
// them down to --image-gc-low-threshold, keeping the image of a running pod and the one
// an archive of --image-dir brings, and says so in its events, its metrics and
// `staticpod images`.
func TestImageGCFreesDownToTheLowThreshold(t *testing.T) {
	n := newSmallImageFSNode(t, 96*mebibyte)
	imageDir := n.path("images")
	if err := os.MkdirAll(imageDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := testenv.WriteImageArchive(filepath.Join(imageDir, "shipped.tar"), bigImage("example.com/shipped:1", 4*mebibyte)); err != nil {
		t.Fatal(err)
	}
	var fill []string
	for i := 0; ; i++ {
		fs, err := n.rt.ImageFS(n.ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The archive's image comes in when the daemon starts: leave it room.
		if fs.Available < fs.Capacity*30/100+10*mebibyte {
			t.Logf("filled %s to %d%% with %d images of 4 MiB, before the archive's", fs.Path, fs.Percent(), len(fill))
			break
		}
		ref := "example.com/unused:" + string(rune('a'+i))
		n.d.MustImportImage(t, n.ns, bigImage(ref, 4*mebibyte))
		fill = append(fill, ref)
	}
	n.write("web.yaml", podManifest("web", "Always", "sleep 3600"))
	sp := n.start("--image-dir", imageDir, "--image-gc-high-threshold", "70", "--image-gc-low-threshold", "50", "--image-minimum-gc-age", "0s")
	sp.awaitLog("removed unused image")
	n.await("web running", time.Minute, running("web-node1/main/0"))
	var fs runner.FSUsage
	testenv.Await(t, "the image filesystem at the low threshold, 50%", time.Minute, func() bool {
		var err error
		fs, err = n.rt.ImageFS(n.ctx)
		return err == nil && fs.Percent() <= 50
	})
	names := n.imageNames()
	t.Logf("%s at %d%%; images left: %v", fs.Path, fs.Percent(), names)
	if !names[e2eImage] || !names["example.com/shipped:1"] {
		t.Errorf("images left %v: want the running pod's %s and the archive's example.com/shipped:1", names, e2eImage)
	}
	removed := 0
	for _, ref := range fill {
		if !names[ref] {
			removed++
		}
	}
	if removed == 0 || removed == len(fill) {
		t.Errorf("%d of %d unused images removed; want some, down to the low threshold, not all", removed, len(fill))
	}
	for i, ref := range fill[:removed] { // oldest first: they were imported in order
		if names[ref] {
			t.Errorf("unused image %d of %d, %s, is left while a younger one went: %v", i, len(fill), ref, names)
		}
	}

	code, body := n.apiGet("/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if code != http.StatusOK || err != nil {
		t.Fatalf("GET /metrics = %d, parse: %v", code, err)
	}
	if f := families["staticpod_image_gc_removed_images_total"]; f == nil || int(f.GetMetric()[0].GetCounter().GetValue()) != removed {
		t.Errorf("staticpod_image_gc_removed_images_total = %v, want %d", f, removed)
	}
	if f := families["staticpod_image_gc_freed_bytes_total"]; f == nil || f.GetMetric()[0].GetCounter().GetValue() < float64(removed*8*mebibyte) {
		t.Errorf("staticpod_image_gc_freed_bytes_total = %v, want at least 8 MiB for each of %d images", f, removed)
	}
	_, events := n.apiGet("/events")
	if got := strings.Count(string(events), `"reason":"`+runner.ReasonImageRemoved+`"`); got != removed {
		t.Errorf("%d %s events, want %d: %s", got, runner.ReasonImageRemoved, removed, events)
	}
	out, code2 := runStaticpod(t, "images", "--api-socket", n.path("staticpod.sock"))
	t.Logf("staticpod images:\n%s", out)
	if code2 != 0 || !hasRow(out, e2eImage, "now", "yes", "no") || !hasRow(out, "example.com/shipped:1", "no", "yes") {
		t.Errorf("staticpod images = %d:\n%s\nwant %s in use, and example.com/shipped:1 pinned", code2, out, e2eImage)
	}
}

// hasRow reports whether a line of a table starts with first and holds every field of
// rest, in order.
func hasRow(table, first string, rest ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != first {
			continue
		}
		i := 1
		for _, want := range rest {
			for i < len(f) && f[i] != want {
				i++
			}
			if i == len(f) {
				return false
			}
			i++
		}
		return true
	}
	return false
}
