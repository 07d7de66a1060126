package images

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

func TestEnsureIfNotPresentPullsOnce(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	reg := startTestRegistry(t, "", "")
	ref := reg.push(t, "app/ifnotpresent:1", imageOptionsFor(t, ""))
	imgs := newStore(d.Client, Config{}, pullLogger(t))

	start := time.Now()
	first, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullIfNotPresent})
	if err != nil {
		t.Fatalf("Ensure(%s, IfNotPresent) = %v", ref, err)
	}
	t.Logf("first pull took %v", time.Since(start))
	if got := reg.take(); got.manifests == 0 || got.blobs == 0 {
		t.Errorf("first ensure made requests %v, want manifest and blob GETs", got.all)
	}

	start = time.Now()
	second, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullIfNotPresent})
	if err != nil {
		t.Fatalf("second Ensure(%s, IfNotPresent) = %v", ref, err)
	}
	t.Logf("second ensure (local) took %v", time.Since(start))
	if got := reg.take(); len(got.all) != 0 {
		t.Errorf("second ensure made requests %v, want none", got.all)
	}
	if !first.Pulled || second.Pulled {
		t.Errorf("Pulled = %v then %v, want a pull then the local image", first.Pulled, second.Pulled)
	}
	if first.Size < 100<<10 || second.Size != 0 {
		t.Errorf("Size = %d then %d, want the pulled content's (a gzipped busybox, over 100 KiB) then none", first.Size, second.Size)
	}
	second.Pulled, second.Size = true, first.Size
	if first != second || first.Ref != ref || !strings.HasPrefix(first.ID, "sha256:") || !strings.HasPrefix(first.Digest, "sha256:") {
		t.Errorf("ensure = %+v then %+v, want the same image named %s with digests", first, second, ref)
	}
}

func TestEnsureAlwaysResolvesWithoutRefetching(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	reg := startTestRegistry(t, "", "")
	ref := reg.push(t, "app/always:1", imageOptionsFor(t, ""))
	imgs := newStore(d.Client, Config{}, pullLogger(t))

	first, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullAlways})
	if err != nil {
		t.Fatalf("Ensure(%s, Always) = %v", ref, err)
	}
	if got := reg.take(); got.blobs != 2 {
		t.Errorf("first pull made requests %v, want the config and layer GETs", got.all)
	}

	start := time.Now()
	second, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullAlways})
	if err != nil {
		t.Fatalf("second Ensure(%s, Always) = %v", ref, err)
	}
	t.Logf("pull of an unchanged image took %v", time.Since(start))
	got := reg.take()
	t.Logf("requests of the unchanged pull: %v", got.all)
	if got.manifests == 0 || got.blobs != 0 {
		t.Errorf("pull of an unchanged image made requests %v, want a manifest request and no blob GET", got.all)
	}
	if second != first {
		t.Errorf("second ensure = %+v, want %+v", second, first)
	}

	// The tag moves to an image with a new config and the same layer: only the config is new.
	reg.push(t, "app/always:1", imageOptionsFor(t, "VERSION=2"))
	reg.take()
	third, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullAlways})
	if err != nil {
		t.Fatalf("ensure(%s, Always) after a push = %v", ref, err)
	}
	if got := reg.take(); got.blobs != 1 {
		t.Errorf("pull of a moved tag made requests %v, want one blob GET (the config)", got.all)
	}
	if third.Digest == first.Digest || third.ID == first.ID {
		t.Errorf("ensure after a push = %+v, want new digests (was %+v)", third, first)
	}
}

func TestEnsureNever(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	reg := startTestRegistry(t, "", "")
	ref := reg.push(t, "app/never:1", imageOptionsFor(t, ""))
	imgs := newStore(d.Client, Config{}, pullLogger(t))

	_, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullNever})
	want := fmt.Sprintf("Container image %q is not present with pull policy of Never", ref)
	if !errors.Is(err, runner.ErrImageNeverPull) || err.Error() != want {
		t.Errorf("Ensure(absent, Never) = %v, want ErrImageNeverPull %q", err, want)
	}
	if got := reg.take(); len(got.all) != 0 {
		t.Errorf("ensure(absent, Never) made requests %v, want none", got.all)
	}

	pulled, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullIfNotPresent})
	if err != nil {
		t.Fatalf("Ensure(%s, IfNotPresent) = %v", ref, err)
	}
	reg.take()
	got, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullNever})
	pulled.Pulled, pulled.Size = false, 0 // present, not pulled again: no size measured
	if err != nil || got != pulled {
		t.Errorf("Ensure(present, Never) = %+v, %v, want %+v", got, err, pulled)
	}
	if got := reg.take(); len(got.all) != 0 {
		t.Errorf("ensure(present, Never) made requests %v, want none", got.all)
	}
}

func TestEnsureMissingImageFailsWithRegistryMessage(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	reg := startTestRegistry(t, "", "")
	imgs := newStore(d.Client, Config{}, pullLogger(t))

	for _, ref := range []string{reg.host + "/nope:1", reg.push(t, "app/missing:1", imageOptionsFor(t, "")) + "-other"} {
		_, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullIfNotPresent})
		prefix := fmt.Sprintf("failed to pull and unpack image %q: ", ref)
		if !errors.Is(err, runner.ErrImagePull) || !strings.HasPrefix(err.Error(), prefix) || !strings.HasSuffix(err.Error(), "not found") {
			t.Errorf("Ensure(%s) = %v, want ErrImagePull %q...not found", ref, err, prefix)
		}
	}
}

// TestEnsureUsesRegistryConfigCredentials pulls from a registry that wants basic auth:
// without credentials containerd gives up before asking (its message says so), with
// wrong ones the registry's 401 is reported, and --registry-config's are used.
func TestEnsureUsesRegistryConfigCredentials(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	t.Setenv("HOME", t.TempDir()) // no credentials of the host's
	reg := startTestRegistry(t, "puller", "s3cret")
	ref := reg.push(t, "private/app:1", imageOptionsFor(t, ""))
	pull := func(user, pass string) (runner.Image, error) {
		config := filepath.Join(t.TempDir(), "config.json")
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
		writeConfigFile(t, config, fmt.Sprintf(`{"auths": {"http://%s/v2/": {"auth": %q}}}`, reg.host, auth))
		return newStore(d.Client, Config{RegistryConfig: config}, pullLogger(t)).Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullAlways})
	}

	_, err := newStore(d.Client, Config{}, pullLogger(t)).Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullAlways})
	if !errors.Is(err, runner.ErrImagePull) || !strings.Contains(err.Error(), "no basic auth credentials") {
		t.Errorf("ensure without credentials = %v, want ErrImagePull: ...no basic auth credentials", err)
	}
	if _, err := pull("puller", "wrong"); !errors.Is(err, runner.ErrImagePull) || !strings.HasSuffix(err.Error(), "401 Unauthorized") {
		t.Errorf("ensure with wrong credentials = %v, want ErrImagePull: ...401 Unauthorized", err)
	}
	if img, err := pull("puller", "s3cret"); err != nil || img.Ref != ref {
		t.Errorf("ensure with --registry-config = %+v, %v, want %s pulled", img, err, ref)
	}
}

func TestPulledImageRuns(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	reg := startTestRegistry(t, "", "")
	ref := reg.push(t, "app/runs:1", imageOptionsFor(t, ""))
	imgs := newStore(d.Client, Config{}, pullLogger(t))
	img, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullIfNotPresent})
	if err != nil {
		t.Fatalf("Ensure(%s) = %v", ref, err)
	}
	f, err := imgs.Facts(ctx, img)
	if conf := f.Config.Config; err != nil || !strings.Contains(strings.Join(conf.Env, " "), "TEST_NAME="+t.Name()) {
		t.Errorf("Facts(%s) = %+v, %v, want the image's env", ref, conf, err)
	}
	out := mustRunImage(t, ctx, d, ref, "cat", "/etc/test-name")
	if out != t.Name() {
		t.Errorf("container of the pulled image printed %q, want %q", out, t.Name())
	}
}

func TestEnsureUnpacksLocalImage(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	opts := imageOptionsFor(t, "")
	opts.Ref = "example.com/app/unpacked:1"
	archive, err := testenv.BuildImage(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.Import(ctx, bytes.NewReader(archive)); err != nil { // content only
		t.Fatalf("import: %v", err)
	}
	if _, err := newStore(d.Client, Config{}, pullLogger(t)).Ensure(ctx, runner.PullRequest{Image: opts.Ref, Policy: corev1.PullNever}); err != nil {
		t.Fatalf("Ensure(%s, Never) = %v", opts.Ref, err)
	}
	img, err := d.Client.GetImage(ctx, opts.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := img.IsUnpacked(ctx, ""); !ok || err != nil {
		t.Errorf("IsUnpacked after ensure = %v, %v, want true", ok, err)
	}
}

// imageOptionsFor returns a busybox image unique to t (its name is in a file of the layer
// and in the env), so that blob requests are t's own; env adds a variable to the config
// only, leaving the layer unchanged.
func imageOptionsFor(t *testing.T, env string) testenv.ImageOptions {
	opts := testenv.ImageOptions{
		Env:   []string{"TEST_NAME=" + t.Name()},
		Files: map[string]testenv.File{"etc/test-name": {Content: []byte(t.Name())}},
	}
	if env != "" {
		opts.Env = append(opts.Env, env)
	}
	return opts
}

// testRegistry is go-containerregistry's in-memory registry on 127.0.0.1, recording the
// requests it serves and, when given a user, requiring HTTP basic auth.
type testRegistry struct {
	host       string // 127.0.0.1:port
	user, pass string

	mu    sync.Mutex // guards reqs and wrong
	reqs  []string   // "METHOD /path" since the last take
	wrong int        // requests refused for the credentials they carried (not for carrying none)
}

func startTestRegistry(t *testing.T, user, pass string) *testRegistry {
	r := &testRegistry{user: user, pass: pass}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.reqs = append(r.reqs, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		if u, p, ok := req.BasicAuth(); r.user != "" && (u != r.user || p != r.pass) {
			if ok {
				r.mu.Lock()
				r.wrong++
				r.mu.Unlock()
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="staticpod-test"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// registryRequests are the requests a registry served, classed.
type registryRequests struct {
	all       []string
	manifests int // any method on .../manifests/...
	blobs     int // GETs of .../blobs/...
}

// take returns the requests served since the last take.
func (r *testRegistry) take() registryRequests {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := registryRequests{all: r.reqs}
	r.reqs = nil
	for _, req := range got.all {
		switch {
		case strings.Contains(req, "/manifests/"):
			got.manifests++
		case strings.HasPrefix(req, "GET ") && strings.Contains(req, "/blobs/"):
			got.blobs++
		}
	}
	return got
}

// push builds the busybox image opts describes, pushes it as repo (name:tag) and returns
// its full reference. The requests of the push are taken.
func (r *testRegistry) push(t *testing.T, repo string, opts testenv.ImageOptions) string {
	t.Helper()
	ref := r.host + "/" + repo
	opts.Ref = ref
	img := mustBuildGGCRImage(t, opts)
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	auth := remote.WithAuth(authn.Anonymous)
	if r.user != "" {
		auth = remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass})
	}
	if err := remote.Write(tag, img, auth); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	r.take()
	return ref
}

// mustBuildGGCRImage builds the busybox image opts describes with testenv and loads it
// with go-containerregistry.
func mustBuildGGCRImage(t *testing.T, opts testenv.ImageOptions) v1.Image {
	t.Helper()
	archive, err := testenv.BuildImage(opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mustUntar(t, archive, dir)
	path, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("read layout: %v", err)
	}
	index, err := path.ImageIndex()
	if err != nil {
		t.Fatalf("read layout: %v", err)
	}
	manifest, err := index.IndexManifest()
	if err != nil || len(manifest.Manifests) != 1 {
		t.Fatalf("read layout index: %v (%d manifests)", err, len(manifest.Manifests))
	}
	img, err := path.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatalf("read layout image: %v", err)
	}
	return img
}

// mustUntar extracts the regular files and directories of a tar into dir.
func mustUntar(t *testing.T, archive []byte, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("untar: %v", err)
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(target, data, 0o644)
			}
		}
		if err != nil {
			t.Fatalf("untar %s: %v", hdr.Name, err)
		}
	}
}

// mustRunImage runs args in a container of the image ref, which must be unpacked, and
// returns its output once it has exited; the container is deleted.
func mustRunImage(t *testing.T, ctx context.Context, d *testenv.Daemon, ref string, args ...string) string {
	t.Helper()
	img, err := d.Client.GetImage(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	id := "run-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	c, err := d.Client.NewContainer(ctx, id, client.WithNewSnapshot(id, img),
		client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs(args...)))
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	defer c.Delete(context.WithoutCancel(ctx), client.WithSnapshotCleanup)
	var out bytes.Buffer // written by one copier: stderr is discarded
	task, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, &out, io.Discard), cio.WithFIFODir(d.FIFODir())))
	if err != nil {
		t.Fatalf("create task: %v", err)
	}
	if _, err := testenv.RunTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// pullLogger logs to t.
func pullLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(pullLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type pullLogWriter struct{ t *testing.T }

func (w pullLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func writeConfigFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
