package runner

import (
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPulledEventSaysHowLongAndHowBig(t *testing.T) {
	h := newHarness(t)
	h.f.pulledSize = 4269694
	pod := testPod(t, "web", "serve", corev1.RestartPolicyAlways)
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	want := regexp.MustCompile(`^Successfully pulled image "busybox:1.36" in [0-9.]+m?s \([0-9.]+m?s including waiting\)\. Image size: 4269694 bytes\.$`)
	for _, e := range h.r.Events().Pod(pod.UID) {
		if e.Reason == "Pulled" {
			if !want.MatchString(e.Message) {
				t.Fatalf("Pulled event %q, want the kubelet's wording", e.Message)
			}
			return
		}
	}
	t.Fatal("no Pulled event")
}
