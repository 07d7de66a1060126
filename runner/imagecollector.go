package runner

import (
	"slices"

	"github.com/staticpod/staticpod/runner/events"
	"github.com/staticpod/staticpod/runner/imagegc"
)

// newImageCollector returns the image collector of r (imagegc.Collector) with what it
// uses of r's parts; it keeps no pointer to r. It checks whether the runner knows
// every pod once a relist period.
func newImageCollector(r *Runner, store ImageStore, policy ImageGCPolicy) *imagegc.Collector {
	if policy.Period == 0 {
		policy.Period = DefaultImageGCPeriod
	}
	return &imagegc.Collector{
		Store: store, Policy: policy, Usage: imageUsage{r.pub, r.pleg}, Wait: r.opts.RelistPeriod,
		Event: func(warning bool, reason, message string) {
			typ := events.Normal
			if warning {
				typ = events.Warning
				r.metrics.imageGCFailures.WithLabelValues(reason).Inc() // its only warnings are failures
			}
			r.events.Add(events.Record{Type: typ, Reason: reason, Message: message})
		},
		Removed: func(freed int64) {
			r.metrics.imagesRemoved.Inc()
			r.metrics.imageBytesFreed.Add(float64(freed))
		},
		Log: r.log, Now: r.now,
	}
}

// imageUsage tells image garbage collection what the runner knows of the images in
// use: the wanted pods' images, their image volumes' included, and the statuses' image
// IDs (published), and the images every container and sandbox of the runtime was
// created from (the PLEG's cache).
type imageUsage struct {
	pub  *published
	pleg *PLEG
}

// Known: every source named in Options.Sources has delivered its pods and the PLEG
// has listed the runtime.
func (u imageUsage) Known() bool {
	return u.pub.relists.Load() > 0 && len(u.pub.unread()) == 0
}

func (u imageUsage) InUse() (wanted, refs []string) {
	wanted, refs = u.pub.images()
	for _, pr := range u.pleg.Pods() {
		for _, ctr := range slices.Concat(pr.Containers, pr.Sandboxes) {
			refs = append(refs, ctr.Image, ctr.ImageRef)
		}
	}
	return wanted, refs
}
