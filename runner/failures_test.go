package runner

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

// A source sends its failures in every update for as long as they last: each is
// recorded once (an event, and a count if the manifest is invalid) when it appears or
// changes, an update that says the source could not be read changes no pod, and the
// end of a failure to read is recorded too.
func TestFailuresAreRecordedOnce(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	l.spawn = func(_ context.Context, w *worker) {}
	pod := testPod(t, "etcd", "sleep 1", "Always")
	bad := manifests.Failure{Location: "etcd.yaml", Problems: []string{"etcd.yaml: spec.containers[0].image: Required value"}, Invalid: true, Kept: []types.UID{pod.UID}}
	worse := bad
	worse.Problems = []string{"etcd.yaml: spec.containers: Required value"}
	down := manifests.Failure{Location: "http://10.0.0.1/pods", Problems: []string{"connection refused"}}
	for _, u := range []manifests.Update{
		{Source: "file", Pods: []*corev1.Pod{pod}},
		{Source: "file", Pods: []*corev1.Pod{pod}, Failures: []manifests.Failure{bad}},
		{Source: "file", Pods: []*corev1.Pod{pod}, Failures: []manifests.Failure{bad}}, // another file changed
		{Source: "file", Pods: []*corev1.Pod{pod}, Failures: []manifests.Failure{worse}},
		{Source: "file", Pods: []*corev1.Pod{pod}},
		{Source: "http", Unchanged: true, Failures: []manifests.Failure{down}},
		{Source: "http", Unchanged: true, Failures: []manifests.Failure{down}},
		{Source: "http", Unchanged: true},
	} {
		l.apply(h.ctx, u)
	}
	var got []string
	for _, e := range h.r.events.All() {
		got = append(got, fmt.Sprintf("%s %s x%d pod=%s", e.Source, e.Reason, e.Count, e.Pod))
	}
	want := []string{
		"file InvalidManifest x1 pod=", "file InvalidManifest x1 pod=default/etcd-n", // bad
		"file InvalidManifest x1 pod=", "file InvalidManifest x1 pod=default/etcd-n", // worse
		"http SourceFailed x1 pod=",
		"http SourceRecovered x1 pod=",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%q\nwant\n%q", got, want)
	}
	if n := counterValue(t, h.r, "file"); n != 2 {
		t.Errorf("staticpod_manifest_errors_total{source=file} = %v, want 2 (two distinct errors)", n)
	}
	if n := counterValue(t, h.r, "http"); n != 0 {
		t.Errorf("staticpod_manifest_errors_total{source=http} = %v, want 0: an unreachable URL is no manifest error", n)
	}
	if h.r.SourceReady("http") {
		t.Error("a URL that never answered counts as delivered: its orphans would be removed")
	}
	if !h.r.SourceReady("file") || len(l.config.desired) != 1 {
		t.Errorf("the file source's pod is not wanted: %v", l.config.desired)
	}
}

// counterValue reads staticpod_manifest_errors_total{source}.
func counterValue(t *testing.T, r *Runner, source string) float64 {
	var m dto.Metric
	if err := r.metrics.manifestErrors.WithLabelValues(source).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
