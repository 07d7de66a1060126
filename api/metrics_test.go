package api

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
)

// scrape reads /metrics with Prometheus's own text parser.
func scrape(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	rec := serve(t, s.Handler(), http.MethodGet, "/metrics", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, rec.Body)
	}
	return families
}

// values maps each series of a family, named by the values of labels joined with "/",
// to its value.
func values(t *testing.T, families map[string]*dto.MetricFamily, name string, labels ...string) map[string]float64 {
	t.Helper()
	f, ok := families[name]
	if !ok {
		t.Fatalf("/metrics has no %s", name)
	}
	out := map[string]float64{}
	for _, m := range f.Metric {
		byName := map[string]string{}
		for _, l := range m.Label {
			byName[l.GetName()] = l.GetValue()
		}
		var key []string
		for _, l := range labels {
			key = append(key, byName[l])
		}
		var v float64
		switch {
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Counter != nil:
			v = m.Counter.GetValue()
		}
		out[strings.Join(key, "/")] = v
	}
	return out
}

func TestMetricsCountPodsByPhaseAndRestarts(t *testing.T) {
	pods := runnerPods()
	pods = append(pods, pod("default", "db-node1", corev1.PodRunning, "db"))
	// A pod being replaced: its old instance still reported under the same name.
	old := pod("default", "db-node1", corev1.PodRunning, "db")
	old.UID = "old"
	pods = append(pods, old)
	cfg := testConfig(newFakeBackend(pods...), nil)
	cfg.Registry = prometheus.NewRegistry()
	s := mustNew(t, cfg)
	families := scrape(t, s)

	if got := families["staticpod_pods"].GetType(); got != dto.MetricType_GAUGE {
		t.Errorf("staticpod_pods is a %s, want a gauge", got)
	}
	wantPhases := map[string]float64{"Pending": 1, "Running": 3, "Succeeded": 1, "Failed": 0, "Unknown": 0}
	if diff := cmp.Diff(wantPhases, values(t, families, "staticpod_pods", "phase")); diff != "" {
		t.Errorf("staticpod_pods{phase} (-want +got):\n%s", diff)
	}
	wantRestarts := map[string]float64{
		"default/web-node1/setup":     0,
		"default/web-node1/nginx":     2,
		"default/web-node1/sidecar":   0,
		"default/db-node1/db":         0,
		"kube-system/etcd-node1/etcd": 0,
		"kube-system/job-node1/run":   0,
	}
	if diff := cmp.Diff(wantRestarts, values(t, families, "staticpod_container_restarts_total", "namespace", "pod", "container")); diff != "" {
		t.Errorf("staticpod_container_restarts_total{namespace,pod,container} (-want +got):\n%s", diff)
	}
}

func TestMetricsServeCollectorsOthersRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	syncs := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "staticpod_pod_sync_duration_seconds", Help: "test"})
	reg.MustRegister(syncs)
	syncs.Observe(0.5)
	cfg := testConfig(newFakeBackend(), nil)
	cfg.Registry = reg
	s := mustNew(t, cfg)
	families := scrape(t, s)
	var names []string
	for name := range families {
		names = append(names, name)
	}
	sort.Strings(names)
	want := []string{"staticpod_pod_sync_duration_seconds", "staticpod_pods"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("families (-want +got):\n%s", diff)
	}
	if _, err := New(cfg); err == nil {
		t.Error("a second server on the same registry: no error, want a duplicate registration")
	}
}

func TestMetricsReportEachUnfinishedPodsReadiness(t *testing.T) {
	pods := runnerPods() // web Ready, etcd Pending, job Succeeded
	unready := pod("default", "api-node1", corev1.PodRunning, "api")
	unready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	// A pod being replaced: the new one not Ready yet, the old one still Ready.
	replacing := pod("default", "db-node1", corev1.PodPending, "db")
	old := pod("default", "db-node1", corev1.PodRunning, "db")
	old.UID = "old"
	old.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	pods = append(pods, unready, replacing, old)
	cfg := testConfig(newFakeBackend(pods...), nil)
	cfg.Registry = prometheus.NewRegistry()
	families := scrape(t, mustNew(t, cfg))

	if got := families["staticpod_pod_ready"].GetType(); got != dto.MetricType_GAUGE {
		t.Errorf("staticpod_pod_ready is a %s, want a gauge", got)
	}
	want := map[string]float64{
		"default/web-node1":      1,
		"default/api-node1":      0,
		"default/db-node1":       1,
		"kube-system/etcd-node1": 0,
	}
	if diff := cmp.Diff(want, values(t, families, "staticpod_pod_ready", "namespace", "pod")); diff != "" {
		t.Errorf("staticpod_pod_ready{namespace,pod} (-want +got):\n%s", diff)
	}
}
