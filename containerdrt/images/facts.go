package images

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/staticpod/staticpod/runner"
)

// Facts are what using an image needs of its content: its config (for a container's
// spec), the config's digest (the image's ID) and the chain ID of its layers (the
// parent of a container's snapshot, and what says it is unpacked). All follow from the
// image's manifest digest alone, since content is named by its digest, so they are
// kept by that digest and never go stale: a burst of pods from one image reads its
// manifest and config once, not three times a container.
type Facts struct {
	Config       ocispec.Image
	ConfigDigest string
	ChainID      string
}

// factCache holds the Facts of the images used, by manifest digest.
type factCache struct {
	mu    sync.Mutex
	facts map[string]Facts
}

// maxFacts bounds the cache: past it, it starts again empty (a node runs few images;
// one that runs many pays a read of each again).
const maxFacts = 64

func (c *factCache) get(digest string) (Facts, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.facts[digest]
	return f, ok && digest != ""
}

func (c *factCache) put(digest string, f Facts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.facts) >= maxFacts || c.facts == nil {
		c.facts = map[string]Facts{}
	}
	c.facts[digest] = f
}

// Facts returns the facts of img, as Ensure described it, read from containerd unless
// known.
func (s *Store) Facts(ctx context.Context, img runner.Image) (Facts, error) {
	if f, ok := s.facts.get(img.Digest); ok {
		return f, nil
	}
	i, err := s.client.GetImage(ctx, img.Ref)
	if err != nil {
		return Facts{}, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	return s.factsOf(ctx, i)
}

// factsOf reads the facts of i and keeps them.
func (s *Store) factsOf(ctx context.Context, i client.Image) (Facts, error) {
	if f, ok := s.facts.get(i.Target().Digest.String()); ok {
		return f, nil
	}
	var f Facts
	conf, err := i.Config(ctx)
	if err != nil {
		return Facts{}, fmt.Errorf("read config of image %s: %w", i.Name(), err)
	}
	f.ConfigDigest = conf.Digest.String()
	blob, err := content.ReadBlob(ctx, i.ContentStore(), conf)
	if err == nil {
		err = json.Unmarshal(blob, &f.Config)
	}
	if err != nil {
		return Facts{}, fmt.Errorf("read config of image %s: %w", i.Name(), err)
	}
	f.ChainID = identity.ChainID(f.Config.RootFS.DiffIDs).String()
	s.facts.put(i.Target().Digest.String(), f)
	return f, nil
}
