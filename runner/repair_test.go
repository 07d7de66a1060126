package runner

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// StopAll (--stop-pods-on-exit, once) has the runtime repair after the stops, as the
// loop does after a relist: the repair reaps the exits, so no shim stays behind for a
// task it stopped.
func TestStopAllRepairsAfterTheStops(t *testing.T) {
	f := newFakeRuntime(time.Now)
	pod := testPod(t, "web", "sleep 100", corev1.RestartPolicyAlways)
	f.put(Container{ID: "web-0", Kind: KindContainer, PodUID: pod.UID, PodName: pod.Name, PodNamespace: pod.Namespace, Name: "c",
		Source: manifests.SourceFile, Hash: manifests.ContainerHash(&pod.Spec.Containers[0]), State: StateRunning})
	r, err := New(Options{Runtime: f, RelistPeriod: time.Hour, HostIP: "10.0.0.1", ResultsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StopAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	calls := slices.Clone(f.calls)
	f.mu.Unlock()
	stop := slices.Index(calls, "StopContainer")
	if stop < 0 || !slices.Contains(calls[stop:], "Repair") {
		t.Errorf("calls = %v, want a Repair after the StopContainer", calls)
	}
}
