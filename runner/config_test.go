package runner

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

func sourcePod(uid, name, source string) *corev1.Pod {
	p := &corev1.Pod{}
	p.UID, p.Name, p.Namespace = types.UID(uid), name, "default"
	p.Annotations = map[string]string{manifests.AnnotationSource: source, manifests.AnnotationLocation: source + ":" + uid}
	return p
}

func uids(m map[types.UID]*corev1.Pod) []string {
	var out []string
	for uid := range m {
		out = append(out, string(uid))
	}
	sort.Strings(out)
	return out
}

func TestConfigMerge(t *testing.T) {
	c := NewConfig()
	if c.Ready("file") {
		t.Fatal("file source ready before its first snapshot")
	}
	desired, conflicts := c.Apply(manifests.Update{Source: "file", Pods: []*corev1.Pod{sourcePod("w1", "web", "file"), sourcePod("d1", "db", "file")}})
	if diff := cmp.Diff([]string{"d1", "w1"}, uids(desired)); diff != "" || len(conflicts) != 0 || !c.Ready("file") {
		t.Fatalf("first snapshot: desired (-want +got) %s, conflicts %v", diff, conflicts)
	}

	// An http pod with a name the file source already runs is refused and reported.
	desired, conflicts = c.Apply(manifests.Update{Source: "http", Pods: []*corev1.Pod{sourcePod("w2", "web", "http"), sourcePod("x1", "extra", "http")}})
	if diff := cmp.Diff([]string{"d1", "w1", "x1"}, uids(desired)); diff != "" {
		t.Errorf("with http: desired (-want +got) %s", diff)
	}
	if len(conflicts) != 1 || conflicts[0].Kept != "w1" || conflicts[0].Dropped != "w2" || conflicts[0].Location != "http:w2" {
		t.Errorf("conflicts = %+v, want w2 dropped for w1", conflicts)
	}

	// An edit is a new UID: the old one leaves the desired set.
	desired, _ = c.Apply(manifests.Update{Source: "file", Pods: []*corev1.Pod{sourcePod("w3", "web", "file")}})
	if diff := cmp.Diff([]string{"w3", "x1"}, uids(desired)); diff != "" {
		t.Errorf("after an edit: desired (-want +got) %s", diff)
	}

	// An empty snapshot removes the source's pods, and the http pod that was refused for
	// its name now runs under it.
	desired, conflicts = c.Apply(manifests.Update{Source: "file"})
	if diff := cmp.Diff([]string{"w2", "x1"}, uids(desired)); diff != "" || len(conflicts) != 0 {
		t.Errorf("after the file source emptied: desired (-want +got) %s, conflicts %v", diff, conflicts)
	}

	// A pod already running keeps its name against an earlier source.
	desired, conflicts = c.Apply(manifests.Update{Source: "file", Pods: []*corev1.Pod{sourcePod("w4", "web", "file")}})
	if diff := cmp.Diff([]string{"w2", "x1"}, uids(desired)); diff != "" || len(conflicts) != 1 || conflicts[0].Dropped != "w4" {
		t.Errorf("file pod against a running http pod: desired (-want +got) %s, conflicts %v", diff, conflicts)
	}
}
