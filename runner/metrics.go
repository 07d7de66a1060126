package runner

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/staticpod/staticpod/manifests"
)

// metrics are the runner's own Prometheus metrics, named after the kubelet's where it
// has one. The API serves them with its own (pods by phase, restarts).
type metrics struct {
	manifestErrors *prometheus.CounterVec // by source
	syncDuration   prometheus.Histogram
	relistDuration prometheus.Histogram
	relistInterval prometheus.Histogram
	pullDuration   prometheus.Histogram
	podStart       prometheus.Histogram

	imagesRemoved   prometheus.Counter     // by image garbage collection
	imageBytesFreed prometheus.Counter     // measured on the image filesystem
	imageGCFailures *prometheus.CounterVec // by event reason
}

func newMetrics(reg prometheus.Registerer) *metrics {
	buckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	h := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "staticpod", Name: name, Help: help, Buckets: buckets})
	}
	m := &metrics{
		manifestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "staticpod_manifest_errors_total",
			Help: "Manifests refused because they do not decode or validate, by source.",
		}, []string{"source"}),
		syncDuration:   h("pod_worker_duration_seconds", "Duration of one pod sync: plan and execution."),
		relistDuration: h("pleg_relist_duration_seconds", "Duration of one PLEG relist of the runtime."),
		relistInterval: h("pleg_relist_interval_seconds", "Interval between the starts of two PLEG relists."),
		pullDuration:   h("image_pull_duration_seconds", "Duration of making an image present (pull or local check)."),
		podStart:       h("pod_start_duration_seconds", "From the manifest first seen to every container of the pod running."),
		imagesRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "staticpod_image_gc_removed_images_total",
			Help: "Unused images removed by image garbage collection.",
		}),
		imageBytesFreed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "staticpod_image_gc_freed_bytes_total",
			Help: "Bytes the image filesystem gained from the images garbage collection removed.",
		}),
		imageGCFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "staticpod_image_gc_failures_total",
			Help: "Image garbage collections that failed, by the reason of their event: ImageGCFailed (a list, a measure or a removal failed) or FreeDiskSpaceFailed (not enough unused images to free down to the low threshold).",
		}, []string{"reason"}),
	}
	for _, reason := range []string{ReasonImageGCFailed, ReasonFreeDiskSpaceFailed} {
		m.imageGCFailures.WithLabelValues(reason) // a 0 before the first failure
	}
	for _, src := range []string{manifests.SourceFile, manifests.SourceHTTP, manifests.SourceAPI} {
		m.manifestErrors.WithLabelValues(src) // a 0, not no series, before the first error
	}
	if reg != nil {
		reg.MustRegister(m.manifestErrors, m.syncDuration, m.relistDuration, m.relistInterval, m.pullDuration, m.podStart,
			m.imagesRemoved, m.imageBytesFreed, m.imageGCFailures)
	}
	return m
}

func since(t time.Time, now time.Time) float64 { return now.Sub(t).Seconds() }
