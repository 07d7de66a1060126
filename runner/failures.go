package runner

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/events"
)

// failures records what sources could not use: each failure once, when it appears or
// changes, as events (on the pods it concerns too) and, for an invalid manifest, in
// staticpod_manifest_errors_total; and the end of a failure to read a source. Sources
// send their failures again in every update for as long as they last, so the record
// of the last update per source is what tells a new failure from an old one. It is
// owned by the loop goroutine.
type failures struct {
	events  *events.Store
	metrics *metrics                                // staticpod_manifest_errors_total
	last    map[string]map[string]manifests.Failure // source -> location -> failure
}

// record records u's failures. podOf names a pod by UID (namespace/name), so that a
// pod's events show with it.
func (f *failures) record(u manifests.Update, podOf func(types.UID) string) {
	last := f.last[u.Source]
	now := make(map[string]manifests.Failure, len(u.Failures))
	for _, fl := range u.Failures {
		now[fl.Location] = fl
		if prev, ok := last[fl.Location]; ok && slices.Equal(prev.Problems, fl.Problems) {
			continue
		}
		msg := strings.Join(fl.Problems, "; ")
		if !fl.Invalid {
			f.events.Add(events.Record{Type: events.Warning, Reason: "SourceFailed", Message: msg + "; the last good manifests stay in force", Source: u.Source})
			continue
		}
		f.metrics.manifestErrors.WithLabelValues(u.Source).Inc()
		f.events.Add(events.Record{Type: events.Warning, Reason: "InvalidManifest", Message: msg, Source: u.Source})
		for _, uid := range fl.Kept {
			f.events.Add(events.Record{UID: uid, Pod: podOf(uid), Type: events.Warning, Reason: "InvalidManifest",
				Message: "manifest is invalid; the pod keeps running on its last good spec: " + msg, Source: u.Source})
		}
	}
	for loc, fl := range last {
		if _, still := now[loc]; still || fl.Invalid && u.Source != manifests.SourceHTTP {
			continue
		}
		msg := loc + " can be read again"
		if u.Source == manifests.SourceHTTP {
			msg = "manifest URL answers again"
		}
		f.events.Add(events.Record{Type: events.Normal, Reason: "SourceRecovered", Message: msg, Source: u.Source})
	}
	f.last[u.Source] = now
}
