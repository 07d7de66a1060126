package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

type fakeStats struct{ sum *statsapi.Summary }

func (f fakeStats) Summary() *statsapi.Summary { return f.sum }

func u64(n uint64) *uint64 { return &n }

func testSummary() *statsapi.Summary {
	at := metav1.NewTime(time.Unix(1700000000, 0))
	cpu := func(ns uint64) *statsapi.CPUStats {
		return &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: u64(ns), UsageNanoCores: u64(3e6)}
	}
	mem := func(ws uint64) *statsapi.MemoryStats {
		return &statsapi.MemoryStats{Time: at, WorkingSetBytes: u64(ws)}
	}
	return &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "node1", CPU: cpu(100e9), Memory: mem(500 << 20)},
		Pods: []statsapi.PodStats{{
			PodRef: statsapi.PodReference{Name: "web-node1", Namespace: "default", UID: "u1"},
			CPU:    cpu(2.5e9), Memory: mem(20 << 20),
			Containers: []statsapi.ContainerStats{{Name: "nginx", StartTime: metav1.NewTime(time.Unix(1699999000, 0)),
				CPU: cpu(2e9), Memory: mem(17 << 20)}},
		}},
	}
}

func TestStatsSummaryServesTheSamplersSummary(t *testing.T) {
	cfg := testConfig(newFakeBackend(), nil)
	cfg.Stats = fakeStats{testSummary()}
	rec := serve(t, mustNew(t, cfg).Handler(), http.MethodGet, "/stats/summary", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /stats/summary = %d %s", rec.Code, rec.Body)
	}
	var got statsapi.Summary
	decodeJSON(t, rec.Body.Bytes(), &got)
	if got.Node.NodeName != "node1" || len(got.Pods) != 1 || *got.Pods[0].Containers[0].Memory.WorkingSetBytes != 17<<20 {
		t.Errorf("summary = %s", rec.Body)
	}
	if !strings.Contains(rec.Body.String(), `"workingSetBytes":17825792`) || !strings.Contains(rec.Body.String(), `"podRef":{"name":"web-node1"`) {
		t.Errorf("summary is not in the kubelet's JSON shape: %s", rec.Body)
	}
}

func TestStatsEndpointsAnswer404WithoutASampler(t *testing.T) {
	h := mustNew(t, testConfig(newFakeBackend(), nil)).Handler()
	for _, path := range []string{"/stats/summary", "/metrics/resource"} {
		if rec := serve(t, h, http.MethodGet, path, nil); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s without stats = %d, want 404", path, rec.Code)
		}
	}
}

func TestResourceMetricsHaveTheKubeletsNamesAndLabels(t *testing.T) {
	cfg := testConfig(newFakeBackend(), nil)
	cfg.Stats = fakeStats{testSummary()}
	rec := serve(t, mustNew(t, cfg).Handler(), http.MethodGet, "/metrics/resource", nil)
	body := rec.Body.String()
	for _, want := range []string{
		`container_cpu_usage_seconds_total{container="nginx",namespace="default",pod="web-node1"} 2 1700000000000`,
		`container_memory_working_set_bytes{container="nginx",namespace="default",pod="web-node1"} 1.7825792e+07 1700000000000`,
		`container_start_time_seconds{container="nginx",namespace="default",pod="web-node1"} 1.699999e+09`,
		`pod_cpu_usage_seconds_total{namespace="default",pod="web-node1"} 2.5 1700000000000`,
		`pod_memory_working_set_bytes{namespace="default",pod="web-node1"} 2.097152e+07 1700000000000`,
		`node_cpu_usage_seconds_total 100 1700000000000`,
		`node_memory_working_set_bytes 5.24288e+08 1700000000000`,
		"scrape_error 0", "resource_scrape_error 0",
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics/resource lacks %q:\n%s", want, body)
		}
	}
	testenv.PromtoolCheckMetrics(t, rec.Body.Bytes())
}
