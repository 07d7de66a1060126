package images

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/staticpod/staticpod/api/wire"
)

// progressEvery is how often a pull's progress is measured, as ctr pull refreshes it.
const progressEvery = 500 * time.Millisecond

// progress measures one pull as ctr pull does: the pull's handler records the
// descriptors it dispatches, and each measure asks the content store which of their
// blobs are present (counted whole) and how far the active ingests of the others are
// (their offsets). The total is the sizes of the image's layers and config, known once
// its manifest is fetched. Manifests and indexes are not counted: they are small and
// fetched first.
type progress struct {
	cs content.Store

	mu        sync.Mutex                           // guards manifests and blobs, which the pull's handlers add to
	manifests []ocispec.Descriptor                 // manifests dispatched and not yet read
	blobs     map[digest.Digest]ocispec.Descriptor // layers and configs: the image's content
	done      map[digest.Digest]bool               // blobs found present; only the measuring goroutine uses it
}

func newProgress(cs content.Store) *progress {
	return &progress{cs: cs, blobs: map[digest.Digest]ocispec.Descriptor{}, done: map[digest.Digest]bool{}}
}

// handler records each descriptor the pull dispatches; it is one of the pull's base
// handlers, called before the descriptor is fetched.
func (p *progress) handler() client.RemoteOpt {
	return client.WithImageHandler(images.HandlerFunc(func(_ context.Context, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch {
		case images.IsManifestType(desc.MediaType):
			p.manifests = append(p.manifests, desc)
		case !images.IsIndexType(desc.MediaType):
			p.blobs[desc.Digest] = desc
		}
		return nil, nil
	}))
}

// watch calls report at once and then every progressEvery until the returned stop is
// called; stop returns once report is no longer called.
func (p *progress) watch(ctx context.Context, report func(wire.PullProgress)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			report(p.measure(ctx))
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// measure returns how far the pull is. A failed look at the content store counts
// nothing for what it concerned: the next measure asks again.
func (p *progress) measure(ctx context.Context) wire.PullProgress {
	p.readManifests(ctx)
	p.mu.Lock()
	blobs := make([]ocispec.Descriptor, 0, len(p.blobs))
	for _, d := range p.blobs {
		blobs = append(blobs, d)
	}
	p.mu.Unlock()
	var out wire.PullProgress
	if len(blobs) == 0 {
		return out
	}
	active := map[string]int64{}
	if statuses, err := p.cs.ListStatuses(ctx); err == nil {
		for _, st := range statuses {
			active[st.Ref] = st.Offset
		}
	}
	for _, d := range blobs {
		out.Total += d.Size
		switch offset, ok := active[remotes.MakeRefKey(ctx, d)]; {
		case p.done[d.Digest]:
			out.Done += d.Size
		case ok:
			out.Done += offset
		default:
			if _, err := p.cs.Info(ctx, d.Digest); err == nil {
				p.done[d.Digest] = true
				out.Done += d.Size
			}
		}
	}
	return out
}

// readManifests adds the config and layers of each manifest fetched since the last
// measure to the blobs, so that the total is whole before the layers are dispatched.
func (p *progress) readManifests(ctx context.Context) {
	p.mu.Lock()
	pending := p.manifests
	p.manifests = nil
	p.mu.Unlock()
	var unread []ocispec.Descriptor
	for _, desc := range pending {
		b, err := content.ReadBlob(ctx, p.cs, desc)
		var m ocispec.Manifest
		if err != nil || json.Unmarshal(b, &m) != nil {
			unread = append(unread, desc) // not fetched yet
			continue
		}
		p.mu.Lock()
		for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
			p.blobs[d.Digest] = d
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	p.manifests = append(p.manifests, unread...)
	p.mu.Unlock()
}
