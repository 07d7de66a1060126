package containerdrt

import (
	"context"
	"fmt"
	"sync"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/staticpod/staticpod/runner"
)

// imageFacts are what creating a container needs of its image: its config, for the
// spec, and the chain ID of its layers, the parent of the container's snapshot. Both
// follow from the image's manifest digest alone (content is named by its digest), so
// they are kept by digest and never go stale: a burst of pods from one image reads the
// image's manifest and config once, not three times a container.
type imageFacts struct {
	config  ocispec.Image
	chainID string
}

// factCache holds the imageFacts of the images containers were created from, by
// manifest digest.
type factCache struct {
	mu    sync.Mutex
	facts map[string]imageFacts
}

// maxImageFacts bounds the cache: past it, it starts again empty (a node runs few
// images; one that runs many pays a read of each again).
const maxImageFacts = 64

// imageFacts returns the facts of image img (as EnsureImage described it), read from
// containerd unless known.
func (r *Runtime) imageFacts(ctx context.Context, img runner.Image) (imageFacts, error) {
	r.facts.mu.Lock()
	f, ok := r.facts.facts[img.Digest]
	r.facts.mu.Unlock()
	if ok && img.Digest != "" {
		return f, nil
	}
	i, err := r.client.GetImage(ctx, img.Ref)
	if err != nil {
		return imageFacts{}, fmt.Errorf("image %s: %w", img.Ref, convertErr(err))
	}
	if f.config, err = i.Spec(ctx); err != nil {
		return imageFacts{}, fmt.Errorf("image %s: config: %w", img.Ref, convertErr(err))
	}
	diffIDs, err := i.RootFS(ctx)
	if err != nil {
		return imageFacts{}, fmt.Errorf("image %s: layers: %w", img.Ref, convertErr(err))
	}
	f.chainID = identity.ChainID(diffIDs).String()
	r.facts.mu.Lock()
	defer r.facts.mu.Unlock()
	if len(r.facts.facts) >= maxImageFacts || r.facts.facts == nil {
		r.facts.facts = map[string]imageFacts{}
	}
	r.facts.facts[i.Target().Digest.String()] = f
	return f, nil
}

// withSnapshotOf prepares snapshot id for the container from the unpacked layers of
// an image whose chain ID is parent, in the container's snapshotter, as
// client.WithNewSnapshot does when it is given no remapping: without reading the
// image again, or the snapshotter's capabilities.
func withSnapshotOf(id, parent string) client.NewContainerOpts {
	return func(ctx context.Context, c *client.Client, info *containers.Container) error {
		if _, err := c.SnapshotService(info.Snapshotter).Prepare(ctx, id, parent); err != nil {
			return err
		}
		info.SnapshotKey = id
		return nil
	}
}
