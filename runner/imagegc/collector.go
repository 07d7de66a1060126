package imagegc

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/staticpod/staticpod/api/wire"
)

// Event reasons of image garbage collection. FreeDiskSpaceFailed is the kubelet's.
const (
	ReasonImageRemoved        = "ImageGarbageCollected"
	ReasonFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	ReasonImageGCFailed       = "ImageGCFailed"
)

// Store is what image garbage collection needs of a runtime's images.
type Store interface {
	// ImageFS returns the usage of the filesystem that holds the images' content and
	// unpacked layers.
	ImageFS(ctx context.Context) (FSUsage, error)
	// ListImages returns every image the runtime holds for staticpod, one per image ID
	// with all its names.
	ListImages(ctx context.Context) ([]wire.StoredImage, error)
	// RemoveImage removes every name of the image and returns once what only it used
	// (content, unpacked layers) is deleted. An image already gone is no error.
	RemoveImage(ctx context.Context, img wire.StoredImage) error
	// ImageName returns the name the runtime stores a pod's image under
	// ("busybox" -> "docker.io/library/busybox:latest"), or "" if it names no image.
	ImageName(image string) string
}

// Usage tells the collector which images are in use.
type Usage interface {
	// Known reports whether every pod that may use an image is known: every source has
	// delivered its pods and the runtime was listed. Before that, an image a pod about
	// to be adopted needs could go.
	Known() bool
	// InUse returns the images the wanted pods' specs name (image volumes included),
	// as the pods name them, and the names, digests and IDs of the images every
	// container and sandbox of the runtime, and every status, names.
	InUse() (wanted, refs []string)
}

// Collector removes unused images when the image filesystem fills up, as the kubelet's
// image GC manager does. It checks every policy period, once Usage knows every pod:
// what is in use is what any of them needs, running, waiting or finished and
// remembered, orphans included. Images an archive of the image dir brings are pinned
// by the runtime.
type Collector struct {
	Store   Store
	Policy  Policy
	Usage   Usage
	Wait    time.Duration                              // how often it asks whether Usage knows every pod
	Event   func(warning bool, reason, message string) // records an event of the node
	Removed func(freed int64)                          // counts an image removed and the bytes it freed
	Log     *slog.Logger
	Now     func() time.Time

	mu       sync.Mutex           // guards lastUsed
	lastUsed map[string]time.Time // image name or digest -> when last seen in use
}

// Run checks the image filesystem every period, the first time as soon as the runner
// knows what is in use, until ctx is done.
func (c *Collector) Run(ctx context.Context) {
	ready := time.NewTicker(c.Wait)
	defer ready.Stop()
	for !c.Ready() {
		select {
		case <-ctx.Done():
			return
		case <-ready.C:
		}
	}
	ready.Stop()
	tick := time.NewTicker(c.Policy.Period)
	defer tick.Stop()
	for {
		if err := c.Collect(ctx); err != nil && ctx.Err() == nil {
			c.Log.Warn("image garbage collection failed", "err", err)
			c.Event(true, ReasonImageGCFailed, err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Ready reports whether every pod that may use an image is known (Usage.Known).
func (c *Collector) Ready() bool { return c.Usage.Known() }

// Collect records which images are in use and, when the image filesystem is at the
// high threshold or above, removes unused images until it is at the low threshold. It
// measures the filesystem again after each removal, so that it stops as soon as the
// space is there, and selects again when sizes promised more than removals freed
// (layers shared with images that stay free nothing).
func (c *Collector) Collect(ctx context.Context) error {
	images, err := c.Images(ctx)
	if err != nil {
		return err
	}
	fs, err := c.Store.ImageFS(ctx)
	if err != nil {
		return fmt.Errorf("image filesystem: %w", err)
	}
	toFree := c.Policy.BytesToFree(fs)
	if toFree == 0 {
		c.Log.Debug("image filesystem below the high threshold", "path", fs.Path, "usage", fs.Percent())
		return nil
	}
	c.Log.Info("image filesystem over the high threshold; removing unused images", "path", fs.Path,
		"usage", fs.Percent(), "high", c.Policy.HighThresholdPercent, "low", c.Policy.LowThresholdPercent, "toFree", toFree)
	start, goal := fs, c.Policy.Goal(fs)
	for fs.Available < goal {
		plan := Select(images, goal-fs.Available, c.Policy.MinAge, c.Now())
		if len(plan) == 0 {
			break
		}
		for _, img := range plan {
			images = slices.DeleteFunc(images, func(i wire.ImageUse) bool { return i.ID == img.ID })
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
		c.Log.Warn("image filesystem still over the low threshold", "path", fs.Path, "usage", fs.Percent(), "low", c.Policy.LowThresholdPercent)
		c.Event(true, ReasonFreeDiskSpaceFailed, msg)
	}
	return nil
}

// remove removes img and returns the image filesystem's usage after it. A removal that
// fails is reported and skipped, as the kubelet goes on after one.
func (c *Collector) remove(ctx context.Context, img wire.ImageUse, before FSUsage) (FSUsage, error) {
	if err := c.Store.RemoveImage(ctx, img.StoredImage); err != nil {
		c.Log.Warn("remove image", "image", imageLabel(img.StoredImage), "err", err)
		c.Event(true, ReasonImageGCFailed, fmt.Sprintf("Failed to remove image %s: %v", imageLabel(img.StoredImage), err))
		return before, nil
	}
	after, err := c.Store.ImageFS(ctx)
	if err != nil {
		return before, fmt.Errorf("image filesystem: %w", err)
	}
	freed := max(after.Available-before.Available, 0)
	c.Removed(freed)
	used := "not used since staticpod started"
	if !img.LastUsed.IsZero() {
		used = "last used " + img.LastUsed.UTC().Format(time.RFC3339)
	}
	c.Log.Info("removed unused image", "image", imageLabel(img.StoredImage), "id", img.ID, "size", img.Size,
		"freed", freed, "used", used, "usage", after.Percent())
	c.Event(false, ReasonImageRemoved, fmt.Sprintf(
		"Removed unused image %s (%s, %d bytes, %s): freed %d bytes; %s is %d%% full",
		imageLabel(img.StoredImage), img.ID, img.Size, used, freed, after.Path, after.Percent()))
	return after, nil
}

// imageLabel names an image in logs and events: its first name, or its ID.
func imageLabel(img wire.StoredImage) string {
	if len(img.Names) > 0 {
		return img.Names[0]
	}
	return img.ID
}

// Images returns every image of the store, with whether a known pod uses it and when
// one last did, and records the use of those in use now.
func (c *Collector) Images(ctx context.Context) ([]wire.ImageUse, error) {
	stored, err := c.Store.ListImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	used := c.inUse()
	now := c.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastUsed == nil {
		c.lastUsed = map[string]time.Time{}
	}
	for ref := range used {
		c.lastUsed[ref] = now
	}
	out := make([]wire.ImageUse, 0, len(stored))
	present := map[string]bool{}
	for _, img := range stored {
		u := wire.ImageUse{StoredImage: img, InUse: uses(used, img)}
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
func refs(img wire.StoredImage) []string {
	return slices.Concat(img.Names, img.Digests, []string{img.ID})
}

// uses reports whether used (see inUse) names img.
func uses(used map[string]bool, img wire.StoredImage) bool {
	return slices.ContainsFunc(refs(img), func(ref string) bool { return used[ref] })
}

// inUse returns the names and digests of the images known pods use (Usage.InUse), the
// images of the wanted pods' specs as the runtime names them.
func (c *Collector) inUse() map[string]bool {
	used := map[string]bool{}
	add := func(ref string) {
		if ref != "" {
			used[ref] = true
		}
	}
	wanted, refs := c.Usage.InUse()
	for _, ref := range refs {
		add(ref)
	}
	for _, image := range wanted {
		add(c.Store.ImageName(image))
	}
	return used
}
