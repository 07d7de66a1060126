package runner

import (
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/manifests"
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

// From the moment its first sync acts, however long that takes, /pods lists a new pod
// as Pending with its containers waiting ContainerCreating, as a kubelet shows it; the
// pod is not settled until the sync ends.
func TestNewPodListedWhileItsFirstSyncActs(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "web", "httpd -f", corev1.RestartPolicyAlways)
	h.r.pub.setDesired(map[types.UID]*corev1.Pod{pod.UID: pod}, t0)
	gate := make(chan struct{})
	h.f.gate["StartSandbox"] = gate
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		t.Fatal(err)
	}
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	synced := make(chan struct{})
	go func() {
		defer close(synced)
		w.syncOnce(h.ctx)
	}()
	for !slices.Contains(h.f.callsOf(), "StartSandbox") {
		time.Sleep(time.Millisecond)
	}
	pods := h.r.Pods()
	if len(pods) != 1 || h.r.Settled() {
		t.Fatalf("while the sandbox starts: %d pods listed, settled %v; want the pod listed, not settled", len(pods), h.r.Settled())
	}
	st := pods[0].Status
	if st.Phase != corev1.PodPending || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Waiting == nil ||
		st.ContainerStatuses[0].State.Waiting.Reason != ReasonContainerCreating || pods[0].Annotations[manifests.AnnotationSeen] == "" {
		t.Fatalf("while the sandbox starts the pod is listed as %+v, want Pending, c waiting ContainerCreating, with the time it was seen", st)
	}
	close(gate)
	<-synced
	if !h.r.Settled() {
		t.Fatal("the pod is not settled after its first sync")
	}
	h.sync(w) // the relist that shows what the first sync started
	if st := h.status(pod.UID); st.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("after the next sync c is %+v, want running", st.ContainerStatuses[0].State)
	}
}
