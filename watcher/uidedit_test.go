package watcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

// givenUID is a metadata.uid as `kubectl get -o yaml` shows one.
const givenUID = types.UID("5b9a2f0e-1c1d-4c8e-9a53-0e2c1b7d9f11")

// uidPod is a pod whose manifest gives its UID, with what an edit may change.
func uidPod(image, echo, env, label, annotation string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  uid: " + string(givenUID) + "\n" +
		"  labels: {tier: " + label + "}\n  annotations: {note: " + annotation + "}\n" +
		"spec:\n  containers:\n  - name: c\n    image: " + image + "\n" +
		"    command: [echo, " + echo + "]\n    env: [{name: MODE, value: " + env + "}]\n"
}

// seen is what a test reads back of the sent pod.
type seen struct {
	UID                      types.UID
	Image, Echo, Env         string
	Label, Annotation, Owner string
}

func seenOf(t *testing.T, u manifests.Update) seen {
	t.Helper()
	if len(u.Pods) != 1 || len(u.Failures) > 0 {
		t.Fatalf("snapshot: pods %v, failures %+v; want web-n alone", names(u), u.Failures)
	}
	p := u.Pods[0]
	c := p.Spec.Containers[0]
	return seen{UID: p.UID, Image: c.Image, Echo: strings.Join(c.Command, " "), Env: c.Env[0].Value,
		Label: p.Labels["tier"], Annotation: p.Annotations["note"], Owner: p.Annotations[manifests.AnnotationLocation]}
}

// A manifest that gives its metadata.uid keeps that UID through every edit, as it
// would on the kubelet: each edit (image, command, env, a label, an annotation) is
// still a new snapshot with the new spec under the same UID, never taken for the pod
// already sent.
func TestWatcherSendsEditsOfAPodThatGivesItsUID(t *testing.T) {
	dir := t.TempDir()
	web := filepath.Join(dir, "web.yaml")
	saveAtomically(t, web, uidPod("busybox:1", "one", "fast", "front", "a"))
	updates := runWatcher(t, dir, time.Hour)
	want := seen{UID: givenUID, Image: "busybox:1", Echo: "echo one", Env: "fast", Label: "front", Annotation: "a", Owner: web}
	if diff := cmp.Diff(want, seenOf(t, awaitUpdate(t, updates, "start"))); diff != "" {
		t.Fatalf("first snapshot (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		edit string
		to   func(*seen)
	}{
		{"the command", func(s *seen) { s.Echo = "echo two" }},
		{"the image", func(s *seen) { s.Image = "busybox:2" }},
		{"an env value", func(s *seen) { s.Env = "slow" }},
		{"a label", func(s *seen) { s.Label = "back" }},
		{"an annotation", func(s *seen) { s.Annotation = "b" }},
	} {
		tc.to(&want)
		saveAtomically(t, web, uidPod(want.Image, strings.TrimPrefix(want.Echo, "echo "), want.Env, want.Label, want.Annotation))
		if diff := cmp.Diff(want, seenOf(t, awaitUpdate(t, updates, "an edit of "+tc.edit))); diff != "" {
			t.Fatalf("after an edit of %s (-want +got):\n%s", tc.edit, diff)
		}
	}
}

// A quick scan for a whole file never sends another file caught half rewritten in
// place, also when that file gives its pod's UID, so that the UID stays while the
// content changes: the half-written pod is not sent until the file is closed.
func TestWatcherQuickScanWaitsForAHalfRewrittenPodThatGivesItsUID(t *testing.T) {
	dir := t.TempDir()
	updates, p := runQuickWatcher(t, dir)
	web := filepath.Join(dir, "web.yaml")
	saveAtomically(t, web, uidPod("busybox:1", "one", "fast", "front", "a"))
	awaitUpdate(t, updates, "the first save")

	half, err := os.OpenFile(web, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	full := uidPod("busybox:2", "two", "slow", "front", "a")
	cut := strings.Index(full, "    env:")
	if _, err := half.WriteString(full[:cut]); err != nil { // valid so far: the pod without its env
		t.Fatal(err)
	}
	saveAtomically(t, filepath.Join(dir, "other.yaml"), pod("other", "busybox:1"))
	noUpdate(t, updates, p, "a whole file while a pod that gives its UID is half rewritten")
	if _, err := half.WriteString(full[cut:]); err != nil {
		t.Fatal(err)
	}
	if err := half.Close(); err != nil {
		t.Fatal(err)
	}
	u := awaitUpdate(t, updates, "the half-rewritten file closed")
	got := map[string][]corev1.EnvVar{}
	for _, p := range u.Pods {
		got[p.Name] = p.Spec.Containers[0].Env
	}
	want := map[string][]corev1.EnvVar{"web-n": {{Name: "MODE", Value: "slow"}}, "other-n": nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("after the file was closed, env by pod (-want +got):\n%s", diff)
	}
}
