package containerdrt

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/runner"
)

// DefaultRegistryConfigDir is where containerd's own pulls read registry hosts
// configuration (<dir>/<host>/hosts.toml), and so where a node's operator has put it.
const DefaultRegistryConfigDir = "/etc/containerd/certs.d"

// ImageConfig configures pulls and imports.
type ImageConfig struct {
	RegistryConfig     string   // extra docker config.json path (--registry-config); searched first
	RootDir            string   // staticpod's root dir: its config.json is searched next, as the kubelet's is
	RegistryConfigDir  string   // containerd's host configuration: <dir>/<host>/hosts.toml (--registry-config-dir); "" = none
	InsecureRegistries []string // hosts (host, host:port or CIDR) talked to over plain HTTP (--insecure-registry)
	Snapshotter        string   // "" = containerd's default
	ImageDir           string   // --image-dir: tarballs imported at start and when added
	// The kubelet's credential provider plugins: their CredentialProviderConfig file (or
	// directory of them) and the directory of their binaries. "" = none.
	CredentialProviderConfig string
	CredentialProviderBinDir string
}

// images pulls, imports and inspects images. It keeps no state of its own beyond the
// credential plugins' cache: what is present is always asked of containerd.
type images struct {
	client    *client.Client
	cfg       ImageConfig
	log       *slog.Logger
	providers []*credentialProvider // the credential provider plugins, in their config's order

	scanned     chan struct{} // closed once the image dir's archives present at start are imported
	scannedOnce sync.Once

	archiveMu sync.Mutex          // guards archives
	archives  map[string][]string // archive path in the image dir -> the images it brought
}

func newImages(c *client.Client, cfg ImageConfig, log *slog.Logger) *images {
	return &images{
		client: c,
		cfg:    cfg,
		log:    log,

		scanned:  make(chan struct{}),
		archives: map[string][]string{},
	}
}

// Imported is closed once the archives in the image dir at start have been imported (at
// once without an image dir), so that pods do not try to pull what a device was shipped.
func (i *images) Imported() <-chan struct{} { return i.scanned }

func (i *images) markScanned() { i.scannedOnce.Do(func() { close(i.scanned) }) }

// ensure makes ref present and unpacked per policy and returns it. ref is a pod's image
// string; it is normalized as containerd's CRI does (busybox -> docker.io/library/busybox:latest).
//
//   - Always resolves ref at the registry every time. Fetching is content-addressed, so an
//     unchanged image costs one manifest request and downloads nothing.
//   - IfNotPresent uses the local image when there is one, unpacking it if needed, and
//     pulls otherwise.
//   - Never uses the local image or fails with runner.ErrImageNeverPull.
//
// Pull failures wrap runner.ErrImagePull and carry the registry's message.
func (i *images) ensure(ctx context.Context, ref string, policy corev1.PullPolicy) (runner.Image, error) {
	name, err := normalizeRef(ref)
	if err != nil {
		return runner.Image{}, err
	}
	if policy != corev1.PullAlways {
		img, err := i.local(ctx, name)
		switch {
		case err == nil:
			return describe(ctx, img)
		case !errdefs.IsNotFound(err):
			return runner.Image{}, err
		case policy == corev1.PullNever:
			return runner.Image{}, &imageError{
				class: runner.ErrImageNeverPull,
				msg:   fmt.Sprintf("Container image %q is not present with pull policy of Never", ref),
			}
		}
	}
	img, err := i.pull(ctx, name)
	if err != nil {
		return runner.Image{}, err
	}
	out, err := describe(ctx, img)
	out.Pulled = true
	return out, err
}

// config returns the image's OCI config (Entrypoint, Cmd, Env, WorkingDir, User,
// StopSignal). The image must be present: ensure it first.
func (i *images) config(ctx context.Context, ref string) (ocispec.ImageConfig, error) {
	name, err := normalizeRef(ref)
	if err != nil {
		return ocispec.ImageConfig{}, err
	}
	img, err := i.client.GetImage(ctx, name)
	if err != nil {
		return ocispec.ImageConfig{}, fmt.Errorf("get image %s: %w", name, err)
	}
	spec, err := img.Spec(ctx)
	if err != nil {
		return ocispec.ImageConfig{}, fmt.Errorf("read config of image %s: %w", name, err)
	}
	return spec.Config, nil
}

// local returns the image named name, unpacked for the snapshotter (unpacking it if it is
// not, which needs no registry). An absent image is an errdefs not-found error.
func (i *images) local(ctx context.Context, name string) (client.Image, error) {
	img, err := i.client.GetImage(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := i.unpack(ctx, img); err != nil {
		return nil, err
	}
	return img, nil
}

// unpack unpacks img for the snapshotter unless it already is.
func (i *images) unpack(ctx context.Context, img client.Image) error {
	ok, err := img.IsUnpacked(ctx, i.cfg.Snapshotter)
	if err != nil {
		return fmt.Errorf("check unpack of image %s: %w", img.Name(), err)
	}
	if ok {
		return nil
	}
	start := time.Now()
	if err := img.Unpack(ctx, i.cfg.Snapshotter); err != nil {
		return fmt.Errorf("unpack image %s: %w", img.Name(), err)
	}
	i.log.Info("unpacked image", "image", img.Name(), "duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// pull resolves name at its registry, fetches what the content store lacks and unpacks
// it for the snapshotter.
func (i *images) pull(ctx context.Context, name string) (client.Image, error) {
	start := time.Now()
	opts := []client.RemoteOpt{client.WithPullUnpack, client.WithResolver(i.resolver(ctx, name))}
	if i.cfg.Snapshotter != "" {
		opts = append(opts, client.WithPullSnapshotter(i.cfg.Snapshotter))
	}
	img, err := i.client.Pull(ctx, name, opts...)
	if err != nil {
		return nil, &imageError{
			class: runner.ErrImagePull,
			msg:   fmt.Sprintf("failed to pull and unpack image %q", name),
			err:   err,
		}
	}
	i.log.Info("pulled image", "image", name, "digest", img.Target().Digest,
		"duration", time.Since(start).Round(time.Millisecond))
	return img, nil
}

// describe returns what the runner knows of img: its name, config digest (the image ID)
// and manifest or index digest (the repo digest).
func describe(ctx context.Context, img client.Image) (runner.Image, error) {
	conf, err := img.Config(ctx)
	if err != nil {
		return runner.Image{}, fmt.Errorf("read config of image %s: %w", img.Name(), err)
	}
	return runner.Image{
		Ref:    img.Name(),
		ID:     conf.Digest.String(),
		Digest: img.Target().Digest.String(),
	}, nil
}

// normalizeRef returns ref fully qualified, as containerd's CRI stores images:
// busybox -> docker.io/library/busybox:latest. An invalid ref wraps runner.ErrImagePull.
func normalizeRef(ref string) (string, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", &imageError{
			class: runner.ErrImagePull,
			msg:   fmt.Sprintf("invalid image name %q", ref),
			err:   err,
		}
	}
	return named.String(), nil
}

// imageError is a failure to make an image present. Its message is the one the kubelet
// would show (the runner reports it as the container's waiting message); errors.Is
// matches its class (runner.ErrImagePull or runner.ErrImageNeverPull) and its cause.
type imageError struct {
	class error  // runner.ErrImagePull or runner.ErrImageNeverPull
	msg   string // what failed, e.g. `failed to pull and unpack image "x"`
	err   error  // the cause, with the registry's message; may be nil
}

func (e *imageError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *imageError) Unwrap() []error {
	if e.err == nil {
		return []error{e.class}
	}
	return []error{e.class, e.err}
}
