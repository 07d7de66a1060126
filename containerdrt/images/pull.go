package images

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/runner"
)

// Ensure makes req's image present and unpacked per its policy and returns it. The image
// is a pod's image string; it is normalized as containerd's CRI does (busybox ->
// docker.io/library/busybox:latest). A pull uses req's pull secrets before the node's
// credentials (see pull).
//
//   - Always resolves ref at the registry every time. Fetching is content-addressed, so an
//     unchanged image costs one manifest request and downloads nothing.
//   - IfNotPresent uses the local image when there is one, unpacking it if needed, and
//     pulls otherwise.
//   - Never uses the local image or fails with runner.ErrImageNeverPull.
//
// Pull failures wrap runner.ErrImagePull and carry the registry's message.
func (s *Store) Ensure(ctx context.Context, req runner.PullRequest) (runner.Image, error) {
	ref, policy := req.Image, req.Policy
	name, err := normalizeRef(ref)
	if err != nil {
		return runner.Image{}, err
	}
	if policy != corev1.PullAlways {
		out, err := s.local(ctx, name)
		switch {
		case err == nil:
			return out, nil
		case !errdefs.IsNotFound(err):
			return runner.Image{}, err
		case policy == corev1.PullNever:
			return runner.Image{}, &imageError{
				class: runner.ErrImageNeverPull,
				msg:   fmt.Sprintf("Container image %q is not present with pull policy of Never", ref),
			}
		}
	}
	img, err := s.pull(ctx, name, req)
	if err != nil {
		return runner.Image{}, err
	}
	f, err := s.factsOf(ctx, img)
	if err != nil {
		return runner.Image{}, err
	}
	out := describe(img, f)
	out.Pulled = true
	// Its content for this platform, as containerd's CRI tells the kubelet an image's size.
	if out.Size, err = img.Size(ctx); err != nil {
		return runner.Image{}, fmt.Errorf("read size of image %s: %w", img.Name(), err)
	}
	return out, nil
}

// local describes the image named name, unpacked for the snapshotter (unpacking it if
// it is not, which needs no registry). An absent image is an errdefs not-found error.
// An image whose facts are known is unpacked when the snapshot of its layers is there:
// asking that takes two calls to containerd, not five.
func (s *Store) local(ctx context.Context, name string) (runner.Image, error) {
	img, err := s.client.GetImage(ctx, name)
	if err != nil {
		return runner.Image{}, err
	}
	if f, ok := s.facts.get(img.Target().Digest.String()); ok && s.cfg.Snapshotter != "" {
		if _, err := s.client.SnapshotService(s.cfg.Snapshotter).Stat(ctx, f.ChainID); err == nil {
			return describe(img, f), nil
		}
	}
	if err := s.unpack(ctx, img); err != nil {
		return runner.Image{}, err
	}
	f, err := s.factsOf(ctx, img)
	if err != nil {
		return runner.Image{}, err
	}
	return describe(img, f), nil
}

// unpack unpacks img for the snapshotter unless it already is.
func (s *Store) unpack(ctx context.Context, img client.Image) error {
	ok, err := img.IsUnpacked(ctx, s.cfg.Snapshotter)
	if err != nil {
		return fmt.Errorf("check unpack of image %s: %w", img.Name(), err)
	}
	if ok {
		return nil
	}
	start := time.Now()
	if err := img.Unpack(ctx, s.cfg.Snapshotter); err != nil {
		return fmt.Errorf("unpack image %s: %w", img.Name(), err)
	}
	s.log.Info("unpacked image", "image", img.Name(), "duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// pull resolves name at its registry, fetches what the content store lacks and unpacks
// it for the snapshotter. As the kubelet does, it tries each credential of the pod's
// pull secrets that matches the image's repository, most specific first, and then the
// node's credentials, until a pull succeeds; a failure tells what each attempt met.
func (s *Store) pull(ctx context.Context, name string, req runner.PullRequest) (client.Image, error) {
	failed := func(err error) error {
		return &imageError{class: runner.ErrImagePull, msg: fmt.Sprintf("failed to pull and unpack image %q", name), err: err}
	}
	keyring, err := newPodKeyring(req.Secrets)
	if err != nil {
		return nil, failed(err)
	}
	var errs []error
	for _, creds := range s.pullAttempts(ctx, name, keyring) {
		img, err := s.pullWith(ctx, name, creds, req.Progress)
		if err == nil {
			return img, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, failed(utilerrors.NewAggregate(errs))
}

// pullWith pulls name with the credentials creds gives for each host that challenges,
// telling report (unless nil) how far it is at once and then every progressEvery until
// it returns.
func (s *Store) pullWith(ctx context.Context, name string, creds hostCredentials, report func(wire.PullProgress)) (client.Image, error) {
	start := time.Now()
	opts := []client.RemoteOpt{client.WithPullUnpack, client.WithResolver(s.resolver(ctx, creds))}
	if s.cfg.Snapshotter != "" {
		opts = append(opts, client.WithPullSnapshotter(s.cfg.Snapshotter))
	}
	if report != nil {
		p := newProgress(s.client.ContentStore())
		opts = append(opts, p.handler())
		defer p.watch(ctx, report)()
	}
	img, err := s.client.Pull(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	s.log.Info("pulled image", "image", name, "digest", img.Target().Digest,
		"duration", time.Since(start).Round(time.Millisecond))
	return img, nil
}

// describe returns what the runner knows of img: its name, config digest (the image ID)
// and manifest or index digest (the repo digest).
func describe(img client.Image, f Facts) runner.Image {
	return runner.Image{Ref: img.Name(), ID: f.ConfigDigest, Digest: img.Target().Digest.String()}
}
