package revisions

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/staticpod/staticpod/manifests"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// revision is pod web of revision uid; its status is ready, or its container started
// at started (not at all when zero), in phase.
func revision(uid string, ready bool, started time.Time, phase corev1.PodPhase) *corev1.Pod {
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name, pod.UID = "default", "web", types.UID(uid)
	pod.Annotations = map[string]string{manifests.AnnotationSource: "file", manifests.AnnotationLocation: "/m/web.yaml",
		manifests.AnnotationSeen: "x", manifests.AnnotationProgressDeadline: "5"}
	pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox:" + uid}}
	pod.Status.Phase = phase
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
	if !started.IsZero() {
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: started}}}}}
	}
	return pod
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func open(t *testing.T, dir string, c *clock) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func observe(t *testing.T, s *Store, pod *corev1.Pod) *Rollback {
	t.Helper()
	rb, err := s.observe(pod)
	if err != nil {
		t.Fatalf("Observe(%s): %v", pod.UID, err)
	}
	return rb
}

func TestObserveRollsBackOnlyWhatMissedItsDeadlineWithAReadyRevisionToGoBackTo(t *testing.T) {
	tests := []struct {
		name   string
		kept   bool // v1 was Ready before
		v2     *corev1.Pod
		after  time.Duration
		reason string // "" for no rollback
	}{
		{"not Ready 5s after its start", true, revision("v2", false, t0, corev1.PodRunning), 5 * time.Second, "was not Ready within 5s of its containers starting"},
		{"not Ready, deadline not reached", true, revision("v2", false, t0, corev1.PodRunning), 4 * time.Second, ""},
		{"Ready in time", true, revision("v2", true, t0, corev1.PodRunning), time.Minute, ""},
		{"never started (a pull)", true, revision("v2", false, time.Time{}, corev1.PodPending), time.Minute, ""},
		{"failed at once", true, revision("v2", false, t0, corev1.PodFailed), 0, "failed"},
		{"succeeded", true, revision("v2", false, t0, corev1.PodSucceeded), time.Minute, ""},
		{"no earlier Ready revision", false, revision("v2", false, t0, corev1.PodRunning), time.Minute, ""},
	}
	for _, tt := range tests {
		c := &clock{t0}
		s := open(t, t.TempDir(), c)
		if tt.kept {
			observe(t, s, revision("v1", true, t0.Add(-time.Hour), corev1.PodRunning))
		}
		c.now = t0.Add(tt.after)
		rb := observe(t, s, tt.v2)
		switch {
		case tt.reason == "" && rb != nil:
			t.Errorf("%s: rolled back (%s), want not", tt.name, rb.Reason)
		case tt.reason != "" && (rb == nil || rb.Reason != tt.reason || rb.From != "v2" || rb.To != "v1"):
			t.Errorf("%s: rollback %+v, want v2 -> v1 because it %s", tt.name, rb, tt.reason)
		}
	}
}

// A crash loop shows only its last start in State; the first start seen counts.
func TestCrashLoopCountsFromItsFirstStart(t *testing.T) {
	c := &clock{t0}
	s := open(t, "", c)
	observe(t, s, revision("v1", true, t0, corev1.PodRunning))
	observe(t, s, revision("v2", false, t0, corev1.PodRunning))
	c.now = t0.Add(5 * time.Second)
	if rb := observe(t, s, revision("v2", false, t0.Add(4*time.Second), corev1.PodRunning)); rb == nil {
		t.Fatal("a revision restarted 4s after its first start was given a new deadline")
	}
}

func TestAnnotationAndDefaultSetTheDeadline(t *testing.T) {
	s := &Store{opts: Options{Deadline: 30 * time.Second}}
	for v, want := range map[string]time.Duration{"7": 7 * time.Second, "0": 0, "-3": 0, "x": 0, "": 0} {
		pod := revision("v", false, t0, corev1.PodRunning)
		pod.Annotations[manifests.AnnotationProgressDeadline] = v
		if got := s.Deadline(pod); got != want {
			t.Errorf("Deadline with %q = %v, want %v", v, got, want)
		}
	}
	pod := revision("v", false, t0, corev1.PodRunning)
	delete(pod.Annotations, manifests.AnnotationProgressDeadline)
	if got := s.Deadline(pod); got != 30*time.Second {
		t.Errorf("Deadline without the annotation = %v, want the default 30s", got)
	}
}

func TestRollbackIsKeptOnDiskSubstitutedAndEndsWithANewRevision(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	reg := prometheus.NewRegistry()
	s, err := Open(Options{Dir: dir, Now: c.Now, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	v1 := revision("v1", true, t0, corev1.PodRunning)
	observe(t, s, v1)
	c.now = t0.Add(time.Minute)
	if rb := observe(t, s, revision("v2", false, t0, corev1.PodRunning)); rb == nil {
		t.Fatal("no rollback")
	}
	var m dto.Metric
	if err := s.rollbacks.Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		n := m.GetCounter().GetValue()
		t.Errorf("rollbacks counted %v, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "default_web.json")); err != nil {
		t.Fatalf("the rollback is not on disk: %v", err)
	}

	// A new Store on the same dir: staticpod restarted, the source still asks for v2.
	s = open(t, dir, c)
	v2 := revision("v2", false, time.Time{}, "")
	desired := map[types.UID]*corev1.Pod{"v2": v2}
	got := s.Substitute(desired)
	run := got["v1"]
	if len(got) != 1 || run == nil {
		t.Fatalf("Substitute = %v, want v1 in place of v2", got)
	}
	if desired["v2"] != v2 || len(desired) != 1 {
		t.Error("Substitute changed the map it was given")
	}
	if run.Annotations[manifests.AnnotationRolledBackFrom] != "v2" || run.Annotations[manifests.AnnotationLocation] != "/m/web.yaml" ||
		run.Annotations[manifests.AnnotationSeen] != "" || run.Spec.Containers[0].Image != "busybox:v1" {
		t.Errorf("the pod run instead = %v %v, want v1 as its source gave it, annotated with v2", run.Annotations, run.Spec.Containers)
	}
	if again := s.Substitute(desired)["v1"]; again != run {
		t.Error("Substitute made another pod for the same rollback: the loop compares them by pointer")
	}
	// Not retried: v2 shown again decides nothing.
	c.now = c.now.Add(time.Hour)
	if rb := observe(t, s, revision("v2", false, t0, corev1.PodFailed)); rb != nil {
		t.Error("a rolled-back name was rolled back again")
	}
	observe(t, s, withAnnotations(revision("v1", true, t0, corev1.PodRunning), run.Annotations))

	// The source asks for v3: it runs, and the rollback is over, also on disk.
	v3 := revision("v3", false, time.Time{}, "")
	if got := s.Substitute(map[types.UID]*corev1.Pod{"v3": v3}); got["v3"] != v3 || len(got) != 1 {
		t.Fatalf("Substitute with a new revision = %v, want it as it is", got)
	}
	if _, ok := open(t, dir, c).RolledBack("default/web"); ok {
		t.Error("the rollback outlived a new revision on disk")
	}
	if kept, _ := open(t, dir, c).Kept("default/web"); kept == nil || kept.UID != "v1" || kept.Annotations[manifests.AnnotationRolledBackFrom] != "" {
		t.Errorf("kept %v, want v1 as its source gave it", kept)
	}
}

func withAnnotations(pod *corev1.Pod, a map[string]string) *corev1.Pod {
	for k, v := range a {
		pod.Annotations[k] = v
	}
	return pod
}

func TestOpenIgnoresFilesItDidNotWrite(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"default_web.json":   "{not json",
		"default_other.json": `{"ready":{"metadata":{"namespace":"default","name":"elsewhere","uid":"u"}}}`,
		"notes.txt":          "hello",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, dir, &clock{t0})
	if len(s.names) != 0 {
		t.Errorf("records %v, want none", s.names)
	}
}

func TestGoneForgetsANameNoPodWantsAnyMore(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	s := open(t, dir, c)
	v1 := revision("v1", true, t0, corev1.PodRunning)
	observe(t, s, v1)
	s.Gone(v1, map[types.UID]*corev1.Pod{"v2": revision("v2", false, t0, "")}) // replaced by v2
	if _, ok := open(t, dir, c).Kept("default/web"); !ok {
		t.Fatal("a revision replaced by another was forgotten")
	}
	s.Gone(v1, map[types.UID]*corev1.Pod{})
	if _, ok := s.Kept("default/web"); ok {
		t.Error("the name of a removed pod is still kept")
	}
	if _, ok := open(t, dir, c).Kept("default/web"); ok {
		t.Error("the name of a removed pod is still kept on disk")
	}
}
