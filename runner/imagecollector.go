package runner

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/staticpod/staticpod/runner/imagegc"
)

// imageCollector removes unused images when the image filesystem fills up, as the
// kubelet's image GC manager does. It checks every policy period, once every source
// named in Options.Sources has delivered its pods and the PLEG has listed the runtime:
// before that, what is in use is not known, and an image a pod about to be adopted
// needs could go.
//
// What is in use is what any pod the runner knows needs: the images of every wanted
// pod's containers and image volumes (running, waiting or finished and remembered, and
// pods waiting for their name), and the image of every container and sandbox the runtime holds, orphans
// included. Images an archive of the image dir brings are pinned by the runtime.
type imageCollector struct {
	store   ImageStore
	policy  ImageGCPolicy
	pub     *published    // the wanted pods' images, the statuses' image IDs, the relists, the sources read
	pleg    *PLEG         // the images of what the runtime holds
	period  time.Duration // how often it checks whether it knows what is in use: the relist period
	events  *Events
	metrics *metrics
	log     *slog.Logger
	now     func() time.Time

	mu       sync.Mutex           // guards lastUsed
	lastUsed map[string]time.Time // image name or digest -> when last seen in use
}

// newImageCollector returns the image collector of r with what it uses of r's parts;
// it keeps no pointer to r.
func newImageCollector(r *Runner, store ImageStore, policy ImageGCPolicy) *imageCollector {
	if policy.Period == 0 {
		policy.Period = DefaultImageGCPeriod
	}
	return &imageCollector{
		store: store, policy: policy, pub: r.pub, pleg: r.pleg, period: r.opts.RelistPeriod,
		events: r.events, metrics: r.metrics, log: r.log, now: r.now, lastUsed: map[string]time.Time{},
	}
}

// Run checks the image filesystem every period, the first time as soon as the runner
// knows what is in use, until ctx is done.
func (c *imageCollector) Run(ctx context.Context) {
	ready := time.NewTicker(c.period)
	defer ready.Stop()
	for !c.ready() {
		select {
		case <-ctx.Done():
			return
		case <-ready.C:
		}
	}
	ready.Stop()
	tick := time.NewTicker(c.policy.Period)
	defer tick.Stop()
	for {
		if err := c.Collect(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("image garbage collection failed", "err", err)
			c.events.Add(Record{Type: EventWarning, Reason: ReasonImageGCFailed, Message: err.Error()})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ready reports whether the runner knows every pod that may use an image.
func (c *imageCollector) ready() bool {
	return c.pub.relists.Load() > 0 && len(c.pub.unread()) == 0
}

// Collect records which images are in use and, when the image filesystem is at the
// high threshold or above, removes unused images until it is at the low threshold. It
// measures the filesystem again after each removal, so that it stops as soon as the
// space is there, and selects again when sizes promised more than removals freed
// (layers shared with images that stay free nothing).
func (c *imageCollector) Collect(ctx context.Context) error {
	images, err := c.Images(ctx)
	if err != nil {
		return err
	}
	fs, err := c.store.ImageFS(ctx)
	if err != nil {
		return fmt.Errorf("image filesystem: %w", err)
	}
	toFree := c.policy.BytesToFree(fs)
	if toFree == 0 {
		c.log.Debug("image filesystem below the high threshold", "path", fs.Path, "usage", fs.Percent())
		return nil
	}
	c.log.Info("image filesystem over the high threshold; removing unused images", "path", fs.Path,
		"usage", fs.Percent(), "high", c.policy.HighThresholdPercent, "low", c.policy.LowThresholdPercent, "toFree", toFree)
	start, goal := fs, c.policy.Goal(fs)
	for fs.Available < goal {
		plan := imagegc.Select(images, goal-fs.Available, c.policy.MinAge, c.now())
		if len(plan) == 0 {
			break
		}
		for _, img := range plan {
			images = slices.DeleteFunc(images, func(i ImageUse) bool { return i.ID == img.ID })
			if uses(c.inUse(), img.StoredImage) {
				continue // a pod came for it since the list: it stays
			}
			if fs, err = c.remove(ctx, img, fs); err != nil {
				return err
			}
			if fs.Available >= goal {
				break
			}
		}
	}
	if fs.Available < goal {
		msg := fmt.Sprintf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only freed %d bytes.",
			toFree, max(fs.Available-start.Available, 0))
		c.log.Warn("image filesystem still over the low threshold", "path", fs.Path, "usage", fs.Percent(), "low", c.policy.LowThresholdPercent)
		c.events.Add(Record{Type: EventWarning, Reason: ReasonFreeDiskSpaceFailed, Message: msg})
	}
	return nil
}

// remove removes img and returns the image filesystem's usage after it. A removal that
// fails is reported and skipped, as the kubelet goes on after one.
func (c *imageCollector) remove(ctx context.Context, img ImageUse, before FSUsage) (FSUsage, error) {
	if err := c.store.RemoveImage(ctx, img.StoredImage); err != nil {
		c.log.Warn("remove image", "image", imageLabel(img.StoredImage), "err", err)
		c.events.Add(Record{Type: EventWarning, Reason: ReasonImageGCFailed, Message: fmt.Sprintf("Failed to remove image %s: %v", imageLabel(img.StoredImage), err)})
		return before, nil
	}
	after, err := c.store.ImageFS(ctx)
	if err != nil {
		return before, fmt.Errorf("image filesystem: %w", err)
	}
	freed := max(after.Available-before.Available, 0)
	c.metrics.imagesRemoved.Inc()
	c.metrics.imageBytesFreed.Add(float64(freed))
	used := "not used since staticpod started"
	if !img.LastUsed.IsZero() {
		used = "last used " + img.LastUsed.UTC().Format(time.RFC3339)
	}
	c.log.Info("removed unused image", "image", imageLabel(img.StoredImage), "id", img.ID, "size", img.Size,
		"freed", freed, "used", used, "usage", after.Percent())
	c.events.Add(Record{Type: EventNormal, Reason: ReasonImageRemoved, Message: fmt.Sprintf(
		"Removed unused image %s (%s, %d bytes, %s): freed %d bytes; %s is %d%% full",
		imageLabel(img.StoredImage), img.ID, img.Size, used, freed, after.Path, after.Percent())})
	return after, nil
}

// imageLabel names an image in logs and events: its first name, or its ID.
func imageLabel(img StoredImage) string {
	if len(img.Names) > 0 {
		return img.Names[0]
	}
	return img.ID
}

// Images returns every image of the store, with whether a known pod uses it and when
// one last did, and records the use of those in use now.
func (c *imageCollector) Images(ctx context.Context) ([]ImageUse, error) {
	stored, err := c.store.ListImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	used := c.inUse()
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for ref := range used {
		c.lastUsed[ref] = now
	}
	out := make([]ImageUse, 0, len(stored))
	present := map[string]bool{}
	for _, img := range stored {
		u := ImageUse{StoredImage: img, InUse: uses(used, img)}
		for _, ref := range refs(img) {
			present[ref] = true
			if t := c.lastUsed[ref]; t.After(u.LastUsed) {
				u.LastUsed = t
			}
		}
		out = append(out, u)
	}
	for ref := range c.lastUsed {
		if !present[ref] {
			delete(c.lastUsed, ref) // the image is gone
		}
	}
	return out, nil
}

// refs are what names an image: its names, its manifest digests and its ID.
func refs(img StoredImage) []string {
	return slices.Concat(img.Names, img.Digests, []string{img.ID})
}

// uses reports whether used (see inUse) names img.
func uses(used map[string]bool, img StoredImage) bool {
	return slices.ContainsFunc(refs(img), func(ref string) bool { return used[ref] })
}

// inUse returns the names and digests of the images known pods use: the images of the
// wanted pods' specs, their image volumes' included (as the runtime names them) and those every container and sandbox
// of the runtime was created from.
func (c *imageCollector) inUse() map[string]bool {
	used := map[string]bool{}
	add := func(ref string) {
		if ref != "" {
			used[ref] = true
		}
	}
	wanted, ids := c.pub.images()
	for _, id := range ids {
		add(id)
	}
	for _, image := range wanted {
		add(c.store.ImageName(image))
	}
	for _, pr := range c.pleg.Pods() {
		for _, ctr := range slices.Concat(pr.Containers, pr.Sandboxes) {
			add(ctr.Image)
			add(ctr.ImageRef)
		}
	}
	return used
}
