package api

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Stats is what pods use, sampled from their cgroups (containerdrt/stats' Sampler
// implements it): a read returns the latest sample, taken anew first when it is older
// than the sampler's period (10 s).
type Stats interface {
	Summary() *statsapi.Summary
}

// statsSummary answers GET /stats/summary as the kubelet does: the node, and each pod
// with its containers, in stats/v1alpha1's shape.
func (s *Server) statsSummary(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Stats == nil {
		writeNotFoundMsg(w, "stats", "", "usage statistics are not enabled on this server")
		return
	}
	writeJSON(w, http.StatusOK, s.cfg.Stats.Summary())
}

// resourceMetrics answers GET /metrics/resource: the kubelet's resource metrics (what
// metrics-server scrapes), computed from the latest sample on each scrape.
func (s *Server) resourceMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Stats == nil {
		writeNotFoundMsg(w, "metrics", "resource", "usage statistics are not enabled on this server")
		return
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(resourceCollector{s.cfg.Stats})
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// The kubelet's resource metrics, names, labels and help (with its stability level) as
// its resource metrics collector has them.
var (
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"[STABLE] Current working set of the node in bytes", nil, nil)
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemoryDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"[STABLE] Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"[STABLE] Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemoryDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"[STABLE] Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	scrapeErrorDesc = prometheus.NewDesc("scrape_error",
		"[ALPHA] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
	resourceScrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// resourceCollector turns a summary into the kubelet's resource metrics, each sample
// stamped with the time its cgroup was read.
type resourceCollector struct {
	stats Stats
}

func (c resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemoryDesc, containerCPUDesc, containerMemoryDesc,
		containerStartDesc, podCPUDesc, podMemoryDesc, scrapeErrorDesc, resourceScrapeErrorDesc} {
		ch <- d
	}
}

func (c resourceCollector) Collect(ch chan<- prometheus.Metric) {
	sum := c.stats.Summary()
	stamped := func(at time.Time, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(d, t, v, labels...))
	}
	seconds := func(ns uint64) float64 { return float64(ns) / float64(time.Second) }
	if cpu := sum.Node.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
		stamped(cpu.Time.Time, nodeCPUDesc, prometheus.CounterValue, seconds(*cpu.UsageCoreNanoSeconds))
	}
	if mem := sum.Node.Memory; mem != nil && mem.WorkingSetBytes != nil {
		stamped(mem.Time.Time, nodeMemoryDesc, prometheus.GaugeValue, float64(*mem.WorkingSetBytes))
	}
	for _, p := range sum.Pods {
		for _, ct := range p.Containers {
			labels := []string{ct.Name, p.PodRef.Name, p.PodRef.Namespace}
			if ct.StartTime.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(containerStartDesc, prometheus.GaugeValue,
					float64(ct.StartTime.UnixNano())/float64(time.Second), labels...)
			}
			if cpu := ct.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
				stamped(cpu.Time.Time, containerCPUDesc, prometheus.CounterValue, seconds(*cpu.UsageCoreNanoSeconds), labels...)
			}
			if mem := ct.Memory; mem != nil && mem.WorkingSetBytes != nil {
				stamped(mem.Time.Time, containerMemoryDesc, prometheus.GaugeValue, float64(*mem.WorkingSetBytes), labels...)
			}
		}
		if cpu := p.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
			stamped(cpu.Time.Time, podCPUDesc, prometheus.CounterValue, seconds(*cpu.UsageCoreNanoSeconds), p.PodRef.Name, p.PodRef.Namespace)
		}
		if mem := p.Memory; mem != nil && mem.WorkingSetBytes != nil {
			stamped(mem.Time.Time, podMemoryDesc, prometheus.GaugeValue, float64(*mem.WorkingSetBytes), p.PodRef.Name, p.PodRef.Namespace)
		}
	}
	// The sampler keeps its last sample: reading it cannot fail.
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 0)
	ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, 0)
}
