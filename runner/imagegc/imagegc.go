// Package imagegc is the kubelet's image garbage collection: its pure rules (when the
// image filesystem is too full, how much to free, and which images go first) and the
// Collector that applies them to a runtime's images, told by the runner which images
// are in use. It imports only api/wire.
package imagegc

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/staticpod/staticpod/api/wire"
)

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

// Policy is the kubelet's image garbage collection policy: once the image
// filesystem is HighThresholdPercent full or more, unused images are removed, least
// recently used first, until it is LowThresholdPercent full; images younger than
// MinAge are kept (one just pulled is about to be used).
type Policy struct {
	HighThresholdPercent int
	LowThresholdPercent  int
	MinAge               time.Duration
	Period               time.Duration // how often usage is checked; the runner's default when 0
}

// Validate returns what is wrong with the policy, as the kubelet checks it.
func (p Policy) Validate() error {
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
func (p Policy) BytesToFree(fs FSUsage) int64 {
	if fs.Capacity <= 0 || p.HighThresholdPercent >= 100 || fs.Percent() < p.HighThresholdPercent {
		return 0
	}
	return max(p.Goal(fs)-fs.Available, 0)
}

// Goal is the free space at the low threshold.
func (p Policy) Goal(fs FSUsage) int64 {
	return fs.Capacity * int64(100-p.LowThresholdPercent) / 100
}

// Select returns the images to remove to free toFree bytes, in the order to
// remove them: of the images neither in use nor pinned and at least minAge old (by
// Created), the least recently used first (ties: the oldest first), until their sizes
// add up to toFree. Fewer are returned when there are not enough.
func Select(images []wire.ImageUse, toFree int64, minAge time.Duration, now time.Time) []wire.ImageUse {
	if toFree <= 0 {
		return nil
	}
	var candidates []wire.ImageUse
	for _, img := range images {
		if img.InUse || img.Pinned || now.Sub(img.Created) < minAge {
			continue
		}
		candidates = append(candidates, img)
	}
	slices.SortStableFunc(candidates, func(a, b wire.ImageUse) int {
		if c := a.LastUsed.Compare(b.LastUsed); c != 0 {
			return c
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	var out []wire.ImageUse
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
