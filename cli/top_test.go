package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpod/staticpod/api/apitest"
)

func u64(n uint64) *uint64 { return &n }

// topSummary: web-node1 uses 3m and 20Mi (nginx 2m 17Mi, sidecar 1m 3Mi), etcd 250m and
// 100Mi, a pod sampled once has no CPU rate yet.
func topSummary(uid string, sampled time.Time) *statsapi.Summary {
	at := metav1.NewTime(sampled)
	usage := func(name string, nanoCores *uint64, ws uint64) (*statsapi.CPUStats, *statsapi.MemoryStats) {
		return &statsapi.CPUStats{Time: at, UsageNanoCores: nanoCores, UsageCoreNanoSeconds: u64(1)},
			&statsapi.MemoryStats{Time: at, WorkingSetBytes: u64(ws)}
	}
	container := func(name string, nanoCores *uint64, ws uint64) statsapi.ContainerStats {
		cpu, mem := usage(name, nanoCores, ws)
		return statsapi.ContainerStats{Name: name, CPU: cpu, Memory: mem}
	}
	pod := func(ns, name, uid string, nanoCores *uint64, ws uint64, cs ...statsapi.ContainerStats) statsapi.PodStats {
		cpu, mem := usage(name, nanoCores, ws)
		return statsapi.PodStats{PodRef: statsapi.PodReference{Namespace: ns, Name: name, UID: uid}, CPU: cpu, Memory: mem, Containers: cs}
	}
	return &statsapi.Summary{Pods: []statsapi.PodStats{
		pod("default", "web-node1", uid, u64(3_400_000), 20<<20+5, container("nginx", u64(2_000_000), 17<<20+5), container("sidecar", u64(1_400_000), 3<<20)),
		pod("kube-system", "etcd-node1", "u2", u64(250_000_000), 100<<20, container("etcd", u64(250_000_000), 100<<20)),
		pod("default", "new-node1", "u3", nil, 1<<20, container("main", nil, 1<<20)),
	}}
}

func TestTopPrintsWhatKubectlTopPodPrints(t *testing.T) {
	d := apitest.NewServer(t, fixturePods())
	d.SetSummary(topSummary("u1", time.Now()))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `NAME                     CPU(cores)   MEMORY(bytes)
kube-system/etcd-node1   250m         100Mi
new-node1                <unknown>    1Mi
web-node1                3m           20Mi
`},
		{[]string{"--sort-by", "memory"}, `NAME                     CPU(cores)   MEMORY(bytes)
kube-system/etcd-node1   250m         100Mi
web-node1                3m           20Mi
new-node1                <unknown>    1Mi
`},
		{[]string{"--containers", "--sort-by", "cpu"}, `POD                      NAME      CPU(cores)   MEMORY(bytes)
kube-system/etcd-node1   etcd      250m         100Mi
web-node1                nginx     2m           17Mi
web-node1                sidecar   1m           3Mi
new-node1                main      <unknown>    1Mi
`},
		{[]string{"--no-headers", "web-node1"}, "web-node1   3m    20Mi\n"},
	} {
		out, errOut, code := runCLI(t, append([]string{"top", "--api-socket", d.Socket}, tc.args...)...)
		if code != 0 || out != tc.want {
			t.Errorf("top %v: exit %d, stderr %q, output:\n%s\nwant:\n%s", tc.args, code, errOut, out, tc.want)
		}
	}
}

func TestTopRefusesWhatItCannotShow(t *testing.T) {
	d := apitest.NewServer(t, fixturePods())
	_, errOut, code := runCLI(t, "top", "--api-socket", d.Socket)
	if code != ExitInvalid || !strings.Contains(errOut, "usage statistics are not enabled") {
		t.Errorf("top without /stats/summary: exit %d, %q", code, errOut)
	}
	d.SetSummary(topSummary("u1", time.Now()))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--sort-by", "name"}, ExitUsage, `--sort-by "name": use cpu or memory`},
		{[]string{"job-node1"}, ExitInvalid, "metrics not available for pod default/job-node1"},
	} {
		_, errOut, code := runCLI(t, append([]string{"top", "--api-socket", d.Socket}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("top %v: exit %d, %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

func TestDescribeShowsUsage(t *testing.T) {
	pods := fixturePods()
	d := apitest.NewServer(t, pods)
	out, _, code := runCLI(t, "describe", "--api-socket", d.Socket, "web-node1")
	if code != 0 || strings.Contains(out, "Usage:") {
		t.Fatalf("describe without /stats/summary: exit %d, a Usage line:\n%s", code, out)
	}
	d.SetSummary(topSummary(string(pods[0].UID), time.Now().Add(-4*time.Second)))
	out, _, code = runCLI(t, "describe", "--api-socket", d.Socket, "web-node1")
	squeezed := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"Pod Limits: <none> Usage: cpu 3m, memory 20Mi (4s ago) nginx: cpu 2m, memory 17Mi (4s ago) sidecar:"} {
		if code != 0 || !strings.Contains(squeezed, want) {
			t.Errorf("describe: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
}
