package containerdrt

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// What stopping a container needs once its pod's spec is gone comes back from its
// labels as it went in.
func TestStopLabelsRoundTrip(t *testing.T) {
	grace := int64(10)
	pod := &corev1.Pod{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace}}
	c := &corev1.Container{
		Name: "web", Image: "busybox", Command: []string{"httpd"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		Lifecycle: &corev1.Lifecycle{
			PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"not", "kept"}}},
			PreStop:   &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain", Port: intstr.FromString("http")}},
		},
	}
	labels := map[string]string{LabelKind: string(runner.KindContainer), LabelPodUID: "0123abcd"}
	stopLabels(labels, pod, c)
	deadline := time.Date(2026, 11, 24, 12, 0, 0, 123, time.UTC)
	labels[labelStopDeadline] = deadline.Format(time.RFC3339Nano)
	var got runner.Container
	if err := fromLabels(&got, labels); err != nil {
		t.Fatal(err)
	}
	if got.PodGrace == nil || *got.PodGrace != 10*time.Second {
		t.Errorf("PodGrace = %v, want 10s", got.PodGrace)
	}
	want := &corev1.Container{Name: "web", Ports: c.Ports, Lifecycle: &corev1.Lifecycle{PreStop: c.Lifecycle.PreStop}}
	if diff := cmp.Diff(want, got.PreStop); diff != "" {
		t.Errorf("PreStop (-want +got):\n%s", diff)
	}
	if !got.StopDeadline.Equal(deadline) {
		t.Errorf("StopDeadline = %v, want %v", got.StopDeadline, deadline)
	}

	// Without a hook nothing is recorded of the container; a hook too large for a
	// label is left out rather than failing the container's creation.
	c.Lifecycle.PreStop = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{strings.Repeat("x", maxLabelSize)}}}
	labels = map[string]string{}
	stopLabels(labels, pod, c)
	if _, ok := labels[LabelPreStop]; ok {
		t.Errorf("a %d-byte hook was put in a label", maxLabelSize)
	}
	c.Lifecycle = nil
	labels = map[string]string{}
	stopLabels(labels, pod, c)
	if _, ok := labels[LabelPreStop]; ok || labels[LabelPodGrace] != "10" {
		t.Errorf("labels of a container without a hook: %v", labels)
	}
}

// A termination message is recorded in a label: whatever the container wrote, the
// label must be one containerd accepts, or the exit could never be recorded.
func TestFitLabel(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"short", "done\n"},
		{"the kubelet's 4096 bytes", strings.Repeat("a", maxTerminationMessage)},
		{"cut inside a character", strings.Repeat("é", maxTerminationMessage/2)},
		{"not text", "\xff\xfe binary \x00"},
	} {
		got := fitLabel(labelMessage, tc.value)
		if len(labelMessage)+len(got) > maxLabelSize || !utf8.ValidString(got) {
			t.Errorf("%s: fitLabel gave %d bytes (valid UTF-8: %v); want at most %d, valid", tc.name, len(got), utf8.ValidString(got), maxLabelSize-len(labelMessage))
		}
		if len(tc.value) < 100 && utf8.ValidString(tc.value) && got != tc.value {
			t.Errorf("%s: fitLabel changed %q to %q", tc.name, tc.value, got)
		}
	}
}

// The location of a pod comes back from its containers' labels, so that a restarted
// staticpod tells which definition runs under a UID; one containerd would refuse in
// a label (too long, not UTF-8) is left out rather than failing the creation.
func TestPodLocationLabelRoundTrip(t *testing.T) {
	for _, tc := range []struct{ name, location, want string }{
		{"a file", "/etc/kubernetes/manifests/etcd.yaml", "/etc/kubernetes/manifests/etcd.yaml"},
		{"a redacted URL", "https://example.com/pods?token=REDACTED", "https://example.com/pods?token=REDACTED"},
		{"too long for a label", "/m/" + strings.Repeat("x", maxLabelSize), ""},
		{"not UTF-8", "/m/\xff.yaml", ""},
	} {
		pod := &corev1.Pod{}
		pod.UID, pod.Name, pod.Namespace = "0123abcd", "etcd-n", "kube-system"
		pod.Annotations = map[string]string{manifests.AnnotationSource: "file", manifests.AnnotationLocation: tc.location}
		labels := podLabels(pod, "", runner.KindContainer, "c", 0)
		for k, v := range labels {
			if len(k)+len(v) > maxLabelSize || !utf8.ValidString(v) {
				t.Errorf("%s: label %s is %d bytes (valid UTF-8: %v)", tc.name, k, len(k)+len(v), utf8.ValidString(v))
			}
		}
		var got runner.Container
		if err := fromLabels(&got, labels); err != nil {
			t.Fatal(err)
		}
		if got.Location != tc.want || got.Source != "file" {
			t.Errorf("%s: read back location %q from %q, want %q", tc.name, got.Location, got.Source, tc.want)
		}
	}
}

// The pod's start time the runner gives comes back from every record of the pod, so
// that a restarted staticpod counts the pod's active deadline from it; without one,
// none is recorded.
func TestPodStartTimeLabelRoundTrip(t *testing.T) {
	start := time.Date(2026, 1, 1, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		name  string
		start *metav1.Time
		want  time.Time
	}{
		{"given", &metav1.Time{Time: start}, start},
		{"not given", nil, time.Time{}},
	} {
		pod := &corev1.Pod{Status: corev1.PodStatus{StartTime: tc.start}}
		pod.UID, pod.Name, pod.Namespace = "0123abcd", "job-n", "default"
		r := &Runtime{cfg: Config{RootDir: t.TempDir()}}
		cfg, err := r.podConfig(pod, manifests.Objects{})
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []runner.Kind{runner.KindSandbox, runner.KindContainer} {
			var got runner.Container
			if err := fromLabels(&got, podLabels(pod, cfg.Start, kind, "c", 0)); err != nil {
				t.Fatal(err)
			}
			if !got.PodStart.Time().Equal(tc.want) {
				t.Errorf("%s, %s: read back pod start %v, want %v", tc.name, kind, got.PodStart, tc.want)
			}
		}
	}
}

// A time label that is absent, as a stop deadline mostly is, reads as the zero time
// without a parse: List reads it for every container at every relist, and a failed
// parse allocates its error.
func TestAbsentTimeLabelReadsAsZeroWithoutAllocating(t *testing.T) {
	if got := parseTime(""); !got.IsZero() {
		t.Errorf("an absent label reads %v, want the zero time", got)
	}
	var read time.Time
	if n := testing.AllocsPerRun(100, func() { read = parseTime("") }); n != 0 || !read.IsZero() {
		t.Errorf("reading an absent label allocates %v times, want none", n)
	}
}
