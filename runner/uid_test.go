package runner

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

// sharedUID is the UID a manifest copied from `kubectl get -o yaml` carries.
const sharedUID = "3f5b3a0e-8a3c-4f57-9d7e-2b8e0c1d9a11"

// uidPod is a pod named name from location of source, with the UID uid given in its
// manifest.
func uidPod(uid, name, source, location string) *corev1.Pod {
	p := &corev1.Pod{}
	p.UID, p.Name, p.Namespace = types.UID(uid), name, "default"
	p.Annotations = map[string]string{manifests.AnnotationSource: source, manifests.AnnotationLocation: location}
	return p
}

// kept is who holds each UID of desired: namespace/name from location.
func kept(desired map[types.UID]*corev1.Pod) map[types.UID]string {
	out := map[types.UID]string{}
	for uid, p := range desired {
		out[uid] = manifests.Key(p) + " from " + manifests.LocationOf(p)
	}
	return out
}

// Two pods of one UID never both run: the one wanted already keeps it, whatever the
// order of the sources and files; among new ones the earlier source, then the first
// file; the other is refused with an error that names both.
func TestConfigGivesAUIDToOnePod(t *testing.T) {
	orig := func() *corev1.Pod { return uidPod(sharedUID, "etcd", "file", "/m/etcd.yaml") }
	copied := func() *corev1.Pod { return uidPod(sharedUID, "etcd2", "file", "/m/etcd-copy.yaml") } // sorts first
	pushed := func() *corev1.Pod { return uidPod(sharedUID, "pushed", "api", "reuse") }
	type step struct {
		source string
		pods   []*corev1.Pod
	}
	for _, tc := range []struct {
		name     string
		steps    []step
		want     string // who holds the UID after the last step
		refused  []string
		location string // of the refused pod
	}{
		{"a copy added beside the running pod, sorting before it",
			[]step{{"file", []*corev1.Pod{orig()}}, {"file", []*corev1.Pod{copied(), orig()}}},
			"default/etcd from /m/etcd.yaml", []string{"default/etcd2"}, "/m/etcd-copy.yaml"},
		{"both new in one snapshot: the first file",
			[]step{{"file", []*corev1.Pod{copied(), orig()}}},
			"default/etcd2 from /m/etcd-copy.yaml", []string{"default/etcd"}, "/m/etcd.yaml"},
		{"a push reusing a file pod's UID",
			[]step{{"file", []*corev1.Pod{orig()}}, {"api", []*corev1.Pod{pushed()}}},
			"default/etcd from /m/etcd.yaml", []string{"default/pushed"}, "reuse"},
		{"a file reusing a running pushed pod's UID, although the file source comes first",
			[]step{{"api", []*corev1.Pod{pushed()}}, {"file", []*corev1.Pod{orig()}}},
			"default/pushed from reuse", []string{"default/etcd"}, "/m/etcd.yaml"},
		{"the holder edited (same file, same UID) keeps it",
			[]step{{"file", []*corev1.Pod{orig()}}, {"api", []*corev1.Pod{pushed()}}, {"file", []*corev1.Pod{uidPod(sharedUID, "etcd-renamed", "file", "/m/etcd.yaml")}}},
			"default/etcd-renamed from /m/etcd.yaml", []string{"default/pushed"}, "reuse"},
		{"the holder gone, the refused pod takes the UID",
			[]step{{"file", []*corev1.Pod{orig()}}, {"api", []*corev1.Pod{pushed()}}, {"file", nil}},
			"default/pushed from reuse", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConfig()
			var desired map[types.UID]*corev1.Pod
			var conflicts []Conflict
			for _, s := range tc.steps {
				desired, conflicts = c.Apply(manifests.Update{Source: s.source, Pods: s.pods})
			}
			if diff := cmp.Diff(map[types.UID]string{sharedUID: tc.want}, kept(desired)); diff != "" {
				t.Errorf("desired (-want +got):\n%s", diff)
			}
			var refused []string
			for _, cf := range conflicts {
				refused = append(refused, cf.Pod)
				if cf.Err.Field != "metadata.uid" || cf.Location != tc.location || cf.Dropped != sharedUID {
					t.Errorf("conflict %+v: want metadata.uid of the pod from %s", cf, tc.location)
				}
				msg := cf.Error()
				holder := strings.Fields(tc.want)[2]
				if !strings.HasPrefix(msg, tc.location+": metadata.uid: ") || !strings.Contains(msg, holder) {
					t.Errorf("conflict says %q; want it to start with %s and field, and to name %s", msg, tc.location, holder)
				}
			}
			if diff := cmp.Diff(tc.refused, refused); diff != "" {
				t.Errorf("refused (-want +got):\n%s", diff)
			}
		})
	}
}

// After a restart of staticpod the pod whose containers run under a UID keeps it, even
// when another manifest's pod comes first in order.
func TestConfigGivesAUIDToThePodThatRuns(t *testing.T) {
	c := NewConfig()
	c.Running = func(uid types.UID) (RunningPod, bool) {
		return RunningPod{Namespace: "default", Name: "etcd", Source: "file", Location: "/m/etcd.yaml"}, uid == sharedUID
	}
	desired, conflicts := c.Apply(manifests.Update{Source: "file", Pods: []*corev1.Pod{
		uidPod(sharedUID, "etcd2", "file", "/m/etcd-copy.yaml"), uidPod(sharedUID, "etcd", "file", "/m/etcd.yaml"),
	}})
	if got := kept(desired)[sharedUID]; got != "default/etcd from /m/etcd.yaml" || len(conflicts) != 1 {
		t.Errorf("UID held by %q, conflicts %v; want the running pod's, and the copy refused", got, conflicts)
	}
}

// The loop keeps a running pod untouched when a second manifest claims its UID, reports
// the refused one once in the log and as an event, and starts it only once the first is
// gone.
func TestLoopKeepsTheRunningPodOfAUID(t *testing.T) {
	h := newHarness(t)
	var log strings.Builder
	h.r.log = slog.New(slog.NewTextHandler(&log, nil))
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	h.r.pleg.Relist(h.ctx)
	first := testPod(t, "first", "sleep 3600", corev1.RestartPolicyAlways)
	first.UID = sharedUID
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{first}})
	h.sync(spawned[0])
	running := h.f.byName(sharedUID)["c/0"]
	copied := testPod(t, "copy", "echo other", corev1.RestartPolicyAlways)
	copied.UID = sharedUID
	for range 2 {
		l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{copied, first}})
		h.sync(spawned[0])
	}
	if len(spawned) != 1 || spawned[0].killed() || spawned[0].pod.Name != first.Name {
		t.Fatalf("workers %d; want the first pod's alone, still wanted as it was", len(spawned))
	}
	if now := h.f.byName(sharedUID)["c/0"]; running.ID == "" || now.ID != running.ID || now.State != StateRunning || h.f.count("CreateContainer") != 1 {
		t.Errorf("the running pod's container is %+v after %d creates; want %s running, untouched", now, h.f.count("CreateContainer"), running.ID)
	}
	if n := strings.Count(log.String(), "pod defined twice"); n != 1 || !strings.Contains(log.String(), "field=metadata.uid") || !strings.Contains(log.String(), "copy.yaml") {
		t.Errorf("%d warnings of the refused pod, want one naming its file and metadata.uid:\n%s", n, log.String())
	}
	var events []string
	for _, e := range h.r.events.All() {
		if e.Reason == "PodConflict" {
			events = append(events, e.Message)
		}
	}
	if len(events) == 0 || !strings.Contains(events[0], "copy.yaml: metadata.uid") || !strings.Contains(events[0], "first.yaml") {
		t.Errorf("PodConflict events %q; want one naming both files", events)
	}
}

// A staticpod restarted beside two manifests of one UID adopts the pod whose containers
// run under it, even when the other comes first and the sources deliver before the
// runtime is first listed.
func TestLoopAfterARestartKeepsThePodThatRunsUnderAUID(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	running := testPod(t, "etcd", "sleep 3600", corev1.RestartPolicyAlways)
	running.UID, running.Spec.HostNetwork = sharedUID, true // no sandbox to adopt
	copied := testPod(t, "copy", "echo other", corev1.RestartPolicyAlways)
	copied.UID = sharedUID
	h.f.put(Container{ID: "old", Kind: KindContainer, PodUID: sharedUID, PodName: running.Name, PodNamespace: running.Namespace,
		Name: "c", Hash: manifests.ContainerHash(&running.Spec.Containers[0]), State: StateRunning, Source: "file"})
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{copied, running}}) // copy.yaml sorts first
	res, err := h.r.pleg.Relist(h.ctx)
	l.relisted(h.ctx, relistDone{res, err})
	if len(spawned) != 1 || spawned[0].pod.Name != running.Name {
		t.Fatalf("workers %d (%s); want one, for the pod that runs (%s)", len(spawned), spawned[len(spawned)-1].pod.Name, running.Name)
	}
	h.sync(spawned[0])
	if n := h.f.count("CreateContainer") + h.f.count("StopContainer"); n != 0 {
		t.Errorf("%d creates and stops; the running pod must be adopted untouched", n)
	}
}
