package api

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/staticpod/staticpod/manifests"
	corev1 "k8s.io/api/core/v1"
)

// The API's own metrics. The runner registers its own (sync latency, relist duration
// and interval, image pulls, pod start latency) on the same registry.
var (
	podsDesc = prometheus.NewDesc("staticpod_pods",
		"Pods the manifest sources want, by phase.", []string{"phase"}, nil)
	restartsDesc = prometheus.NewDesc("staticpod_container_restarts_total",
		"Restarts of each container of each wanted pod (its status.restartCount); it starts again at 0 when a changed manifest makes a new pod.",
		[]string{"namespace", "pod", "container"}, nil)
	readyDesc = prometheus.NewDesc("staticpod_pod_ready",
		"1 while the pod's Ready condition is true, else 0, for each wanted pod that has not succeeded.",
		[]string{"namespace", "pod"}, nil)
)

// phases are every pod phase, each reported even when no pod is in it so that alerts see
// a 0 rather than no series.
var phases = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown}

// registerMetrics registers the API's collectors, the pod metrics computed from the
// backend's statuses at each scrape. The runner registers its own (syncs, relists,
// manifest errors) on the same registry.
func registerMetrics(reg *prometheus.Registry, backend Backend) error {
	if err := reg.Register(podCollector{backend}); err != nil {
		return fmt.Errorf("register api metrics: %w", err)
	}
	return nil
}

func metricsHandler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// podCollector computes the pod metrics from the runner's statuses at each scrape.
type podCollector struct {
	backend Backend
}

func (c podCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- podsDesc
	ch <- restartsDesc
	ch <- readyDesc
}

func (c podCollector) Collect(ch chan<- prometheus.Metric) {
	pods := c.backend.Pods()
	byPhase := map[corev1.PodPhase]int{}
	// While a changed manifest replaces a pod, the old and the new one share a name;
	// a series is reported once, for the first of them.
	seen := map[[3]string]bool{}
	ready := map[[2]string]bool{} // a name is Ready when any pod of that name is
	for _, p := range pods {
		phase := p.Status.Phase
		if phase == "" {
			phase = corev1.PodPending
		}
		byPhase[phase]++
		if phase != corev1.PodSucceeded { // done for good: not Ready, and nothing to alert on
			key := [2]string{p.Namespace, p.Name}
			ready[key] = ready[key] || manifests.ConditionTrue(p.Status, corev1.PodReady)
		}
		for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, cs := range list {
				key := [3]string{p.Namespace, p.Name, cs.Name}
				if seen[key] {
					continue
				}
				seen[key] = true
				ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(cs.RestartCount), key[:]...)
			}
		}
	}
	for _, phase := range phases {
		ch <- prometheus.MustNewConstMetric(podsDesc, prometheus.GaugeValue, float64(byPhase[phase]), string(phase))
	}
	for key, r := range ready {
		v := 0.0
		if r {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, v, key[:]...)
	}
}
