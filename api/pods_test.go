package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runnerPods are pods as the runner reports them: statuses with init containers,
// restarts and a terminated last state.
func runnerPods() []*corev1.Pod {
	web := pod("default", "web-node1", corev1.PodRunning, "nginx", "sidecar")
	web.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
	web.Status.InitContainerStatuses = []corev1.ContainerStatus{{
		Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
	}}
	web.Status.ContainerStatuses[0].RestartCount = 2
	web.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"},
	}
	web.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	job := pod("kube-system", "job-node1", corev1.PodSucceeded, "run")
	job.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	pending := pod("kube-system", "etcd-node1", corev1.PodPending, "etcd")
	pending.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	return []*corev1.Pod{web, pending, job}
}

func TestPodsIsAPodListWithTheRunnersStatuses(t *testing.T) {
	pods := runnerPods()
	s := mustNew(t, testConfig(newFakeBackend(pods...), nil))
	for _, path := range []string{"/pods", "/pods/"} {
		rec := serve(t, s.Handler(), http.MethodGet, path, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, rec.Code, rec.Body)
		}
		var list corev1.PodList
		decodeJSON(t, rec.Body.Bytes(), &list)
		if list.Kind != "PodList" || list.APIVersion != "v1" {
			t.Errorf("GET %s kind = %s %s, want v1 PodList", path, list.APIVersion, list.Kind)
		}
		var want []corev1.Pod
		for _, p := range pods {
			w := *p
			w.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
			want = append(want, w)
		}
		if diff := cmp.Diff(want, list.Items); diff != "" {
			t.Errorf("GET %s items (-want +got):\n%s", path, diff)
		}
	}
	if pods[0].Kind != "" {
		t.Errorf("the runner's pod was changed: kind %q", pods[0].Kind)
	}
}

func TestPodsOfNoPodIsAnEmptyList(t *testing.T) {
	s := mustNew(t, testConfig(newFakeBackend(), nil))
	rec := serve(t, s.Handler(), http.MethodGet, "/pods", nil)
	if !strings.Contains(rec.Body.String(), `"items":[]`) {
		t.Errorf("GET /pods = %s, want items []", rec.Body)
	}
}

func TestPodByNamespaceAndName(t *testing.T) {
	pods := runnerPods()
	s := mustNew(t, testConfig(newFakeBackend(pods...), nil))
	rec := serve(t, s.Handler(), http.MethodGet, "/pods/kube-system/etcd-node1", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET = %d %s", rec.Code, rec.Body)
	}
	var got corev1.Pod
	decodeJSON(t, rec.Body.Bytes(), &got)
	if got.Kind != "Pod" || got.Name != "etcd-node1" || got.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
		t.Errorf("GET /pods/kube-system/etcd-node1 = %+v", got)
	}

	rec = serve(t, s.Handler(), http.MethodGet, "/pods/default/etcd-node1", nil)
	st := wantStatus(t, rec, http.StatusNotFound, metav1.StatusReasonNotFound)
	if st.Message != `pods "etcd-node1" not found` || st.Details == nil || st.Details.Name != "etcd-node1" || st.Details.Kind != "pods" {
		t.Errorf("404 = %+v, want the apiserver's pods \"etcd-node1\" not found", st)
	}
}

func TestUnknownPathsAndMethodsAreStatuses(t *testing.T) {
	s := mustNew(t, testConfig(newFakeBackend(), newFakeStore()))
	rec := serve(t, s.Handler(), http.MethodGet, "/nope", nil)
	wantStatus(t, rec, http.StatusNotFound, metav1.StatusReasonNotFound)

	rec = serve(t, s.Handler(), http.MethodPost, "/manifests/web", nil)
	wantStatus(t, rec, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
	if got := rec.Header().Get("Allow"); got != "GET, PUT, DELETE" {
		t.Errorf("Allow = %q, want GET, PUT, DELETE", got)
	}
	rec = serve(t, s.Handler(), http.MethodDelete, "/pods", nil)
	wantStatus(t, rec, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
}

func TestHealthz(t *testing.T) {
	b := newFakeBackend()
	var runtimeErr error
	cfg := testConfig(b, nil)
	cfg.RuntimeHealthy = func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the runtime check has no deadline")
		}
		return runtimeErr
	}
	s := mustNew(t, cfg)
	tests := []struct {
		name       string
		runtimeErr error
		healthy    bool
		last       time.Time
		code       int
		want       []string
	}{
		{"healthy", nil, true, time.Now(), 200, []string{"ok"}},
		{"containerd down", errors.New("connection refused"), true, time.Now(), 503, []string{"container runtime unreachable: connection refused"}},
		{"pleg stale", nil, false, time.Now().Add(-4 * time.Minute), 503, []string{"PLEG last relisted 4m0s ago"}},
		{"pleg never", nil, false, time.Time{}, 503, []string{"PLEG has not relisted yet"}},
		{"both", errors.New("dial timeout"), false, time.Time{}, 503, []string{"dial timeout", "PLEG has not relisted yet"}},
	}
	for _, tt := range tests {
		runtimeErr = tt.runtimeErr
		b.setHealthy(tt.healthy, tt.last)
		rec := serve(t, s.Handler(), http.MethodGet, "/healthz", nil)
		if rec.Code != tt.code || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
			t.Errorf("%s: /healthz = %d %s, want %d text", tt.name, rec.Code, rec.Header().Get("Content-Type"), tt.code)
		}
		for _, w := range tt.want {
			if !strings.Contains(rec.Body.String(), w) {
				t.Errorf("%s: /healthz body %q does not say %q", tt.name, rec.Body, w)
			}
		}
	}
}

func TestReadyzWaitsForEverySource(t *testing.T) {
	b := newFakeBackend()
	cfg := testConfig(b, nil)
	cfg.Sources = []string{"file", "http", "api"}
	s := mustNew(t, cfg)
	check := func(code int, body string) {
		t.Helper()
		rec := serve(t, s.Handler(), http.MethodGet, "/readyz", nil)
		if rec.Code != code || rec.Body.String() != body {
			t.Errorf("/readyz = %d %q, want %d %q", rec.Code, rec.Body, code, body)
		}
	}
	check(503, "sources not ready: file, http, api\n")
	b.setReady("file")
	b.setReady("api")
	check(503, "sources not ready: http\n")
	b.setReady("http")
	check(200, "ok\n")
}

func TestReadyzPodsWaitsForTheSourcesAndEveryPodsFirstSync(t *testing.T) {
	b := newFakeBackend()
	cfg := testConfig(b, nil)
	cfg.Sources = []string{"file", "api"}
	s := mustNew(t, cfg)
	check := func(code int, body string) {
		t.Helper()
		rec := serve(t, s.Handler(), http.MethodGet, "/readyz/pods", nil)
		if rec.Code != code || rec.Body.String() != body {
			t.Errorf("/readyz/pods = %d %q, want %d %q", rec.Code, rec.Body, code, body)
		}
	}
	b.setSettled(false)
	check(503, "sources not ready: file, api\n")
	b.setReady("file")
	b.setReady("api")
	check(503, "pods not synced yet: a wanted pod has not been synced once (its images are pulled or its containers started)\n")
	if rec := serve(t, s.Handler(), http.MethodGet, "/readyz", nil); rec.Code != 200 {
		t.Errorf("/readyz = %d while a pod has no status, want 200: it asks for the sources only", rec.Code)
	}
	b.setSettled(true)
	check(200, "ok\n")
}
