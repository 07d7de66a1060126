package runner

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/api/wire"
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

// While a pod's first pull runs, /pods lists it as Pending with its container waiting
// ContainerCreating and the bytes pulled so far; the pod is not settled (synced once)
// until its sync ends.
func TestFirstPullShowsItsProgressInTheStatus(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "web", "httpd -f", corev1.RestartPolicyAlways)
	h.r.pub.setDesired(map[types.UID]*corev1.Pod{pod.UID: pod}, t0)
	h.f.pullProgress = []wire.PullProgress{{}, {Done: 12_300_000, Total: 45_600_000}}
	type seen struct {
		listed  int
		phase   corev1.PodPhase
		waiting corev1.ContainerStateWaiting
		settled bool
	}
	var during []seen
	h.f.whilePulling = func() {
		pods := h.r.Pods()
		s := seen{listed: len(pods), settled: h.r.Settled()}
		if len(pods) == 1 {
			s.phase = pods[0].Status.Phase
			if w := pods[0].Status.ContainerStatuses[0].State.Waiting; w != nil {
				s.waiting = *w
			}
		}
		during = append(during, s)
	}
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)

	want := []seen{
		{1, corev1.PodPending, corev1.ContainerStateWaiting{Reason: ReasonContainerCreating, Message: `Pulling image "busybox:1.36"`}, false},
		{1, corev1.PodPending, corev1.ContainerStateWaiting{Reason: ReasonContainerCreating, Message: `Pulling image "busybox:1.36": 12.3 MB of 45.6 MB`}, false},
	}
	if diff := cmp.Diff(want, during, cmp.AllowUnexported(seen{})); diff != "" {
		t.Errorf("status while pulling (-want +got):\n%s", diff)
	}
	if st := h.status(pod.UID).ContainerStatuses[0].State; !h.r.Settled() || st.Waiting == nil || st.Waiting.Message != "" {
		t.Errorf("after the sync: settled %v, state %+v; want settled and the sync's status", h.r.Settled(), st)
	}
}
