package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/staticpod/staticpod/api/wire"
)

// The kubelet's image garbage collection defaults (--image-gc-high-threshold,
// --image-gc-low-threshold, --image-minimum-gc-age) and its period (ImageGCPeriod).
const (
	DefaultImageGCHighThreshold = 85
	DefaultImageGCLowThreshold  = 80
	DefaultImageMinimumGCAge    = 2 * time.Minute
	DefaultImageGCPeriod        = 5 * time.Minute
)

// Event reasons of image garbage collection. FreeDiskSpaceFailed is the kubelet's.
const (
	ReasonImageRemoved        = "ImageGarbageCollected"
	ReasonFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	ReasonImageGCFailed       = "ImageGCFailed"
)

// ImageStore is what image garbage collection needs from a runtime, beside Runtime.
type ImageStore interface {
	// ImageFS returns the usage of the filesystem that holds the images' content and
	// unpacked layers.
	ImageFS(ctx context.Context) (FSUsage, error)
	// ListImages returns every image the runtime holds for staticpod, one per image ID
	// with all its names.
	ListImages(ctx context.Context) ([]StoredImage, error)
	// RemoveImage removes every name of the image and returns once what only it used
	// (content, unpacked layers) is deleted. An image already gone is no error.
	RemoveImage(ctx context.Context, img StoredImage) error
	// ImageName returns the name the runtime stores a pod's image under
	// ("busybox" -> "docker.io/library/busybox:latest"), or "" if it names no image.
	ImageName(image string) string
}

// FSUsage is the size and free space of a filesystem, in bytes.
type FSUsage struct {
	Path      string // where it was measured
	Capacity  int64
	Available int64 // free for unprivileged use, as df's "Avail"
}

// Percent is how full the filesystem is, as the kubelet computes it: 100 - available%.
func (u FSUsage) Percent() int {
	if u.Capacity <= 0 {
		return 0
	}
	return 100 - int(u.Available*100/u.Capacity)
}

// StoredImage is an image in the runtime; clients read it as wire.StoredImage.
type StoredImage = wire.StoredImage

// ImageGCPolicy is the kubelet's image garbage collection policy: once the image
// filesystem is HighThresholdPercent full or more, unused images are removed, least
// recently used first, until it is LowThresholdPercent full; images younger than
// MinAge are kept (one just pulled is about to be used).
type ImageGCPolicy struct {
	HighThresholdPercent int
	LowThresholdPercent  int
	MinAge               time.Duration
	Period               time.Duration // how often usage is checked; DefaultImageGCPeriod when 0
}

// Validate returns what is wrong with the policy, as the kubelet checks it.
func (p ImageGCPolicy) Validate() error {
	switch {
	case p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100:
		return fmt.Errorf("image GC high threshold %d: must be in [0, 100]", p.HighThresholdPercent)
	case p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100:
		return fmt.Errorf("image GC low threshold %d: must be in [0, 100]", p.LowThresholdPercent)
	case p.LowThresholdPercent > p.HighThresholdPercent:
		return fmt.Errorf("image GC low threshold %d is higher than the high threshold %d", p.LowThresholdPercent, p.HighThresholdPercent)
	case p.MinAge < 0:
		return fmt.Errorf("image minimum GC age %v: must not be negative", p.MinAge)
	}
	return nil
}

// BytesToFree is how much must be freed to bring fs down to the low threshold, when it
// is at the high threshold or above; 0 otherwise. A high threshold of 100 turns
// collection off, as on the kubelet.
func (p ImageGCPolicy) BytesToFree(fs FSUsage) int64 {
	if fs.Capacity <= 0 || p.HighThresholdPercent >= 100 || fs.Percent() < p.HighThresholdPercent {
		return 0
	}
	return max(p.goal(fs)-fs.Available, 0)
}

// goal is the free space at the low threshold.
func (p ImageGCPolicy) goal(fs FSUsage) int64 {
	return fs.Capacity * int64(100-p.LowThresholdPercent) / 100
}

// ImageUse is an image with what garbage collection weighs: whether a known pod needs
// it and when one last did. Clients read it as wire.ImageUse.
type ImageUse = wire.ImageUse

// SelectImages returns the images to remove to free toFree bytes, in the order to
// remove them: of the images neither in use nor pinned and at least minAge old (by
// Created), the least recently used first (ties: the oldest first), until their sizes
// add up to toFree. Fewer are returned when there are not enough.
func SelectImages(images []ImageUse, toFree int64, minAge time.Duration, now time.Time) []ImageUse {
	if toFree <= 0 {
		return nil
	}
	var candidates []ImageUse
	for _, img := range images {
		if img.InUse || img.Pinned || now.Sub(img.Created) < minAge {
			continue
		}
		candidates = append(candidates, img)
	}
	slices.SortStableFunc(candidates, func(a, b ImageUse) int {
		if c := a.LastUsed.Compare(b.LastUsed); c != 0 {
			return c
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	var out []ImageUse
	var sum int64
	for _, img := range candidates {
		if sum >= toFree {
			break
		}
		out = append(out, img)
		sum += img.Size
	}
	return out
}
