package node

import (
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestNewSetsTheWellKnownLabelsAndAllocatable(t *testing.T) {
	n, err := New(Config{
		Name:           "gate-1",
		Labels:         map[string]string{"site": "north", corev1.LabelArchStable: "arm64"},
		Capacity:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("2Gi")},
		SystemReserved: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("3Gi")},
		KubeReserved:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"site": "north", "kubernetes.io/hostname": "gate-1", "kubernetes.io/os": runtime.GOOS, "kubernetes.io/arch": "arm64"}
	if diff := cmp.Diff(wantLabels, n.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if cpu, mem := n.Status.Allocatable.Cpu().String(), n.Status.Allocatable.Memory().String(); cpu != "3250m" || mem != "0" {
		t.Errorf("allocatable = cpu %s memory %s, want 3250m and 0 (never below zero)", cpu, mem)
	}
	if n.Kind != "Node" || n.Name != "gate-1" {
		t.Errorf("node = %s %s, want Node gate-1", n.Kind, n.Name)
	}
}

func TestProbeReadsTheMachine(t *testing.T) {
	c, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	if c.Cpu().Value() != int64(runtime.NumCPU()) || c.Memory().Value() <= 0 {
		t.Errorf("Probe() = %v", c)
	}
}

func TestParseLabels(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    map[string]string
		wantErr string
	}{
		{in: nil, want: map[string]string{}},
		{in: []string{"disktype=ssd,site=north", "example.com/role=camera"}, want: map[string]string{"disktype": "ssd", "site": "north", "example.com/role": "camera"}},
		{in: []string{"empty="}, want: map[string]string{"empty": ""}},
		{in: []string{"node.kubernetes.io/role=edge", "topology.kubernetes.io/zone=z1"}, want: map[string]string{"node.kubernetes.io/role": "edge", "topology.kubernetes.io/zone": "z1"}},
		{in: []string{"disktype"}, wantErr: `"disktype" is not key=value`},
		{in: []string{"bad key=x"}, wantErr: `key "bad key"`},
		{in: []string{"k=bad value"}, wantErr: `value "bad value" of k`},
		{in: []string{"kubernetes.io/role=master"}, wantErr: "unknown 'kubernetes.io' or 'k8s.io' labels [kubernetes.io/role]"},
		{in: []string{"foo.k8s.io/x=y"}, wantErr: "unknown 'kubernetes.io' or 'k8s.io' labels [foo.k8s.io/x]"},
	} {
		got, err := ParseLabels(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseLabels(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseLabels(%q): %v", tc.in, err)
		} else if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseLabels(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestParseTaints(t *testing.T) {
	got, err := ParseTaints([]string{"dedicated=camera:NoExecute,maintenance:NoSchedule"})
	want := []corev1.Taint{{Key: "dedicated", Value: "camera", Effect: corev1.TaintEffectNoExecute}, {Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("ParseTaints = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"dedicated=camera", "k=v:Never", ":NoExecute", "k=bad value:NoExecute"} {
		if _, err := ParseTaints([]string{bad}); err == nil || !strings.Contains(err.Error(), "--register-with-taints") {
			t.Errorf("ParseTaints(%q) = %v, want an error naming the flag", bad, err)
		}
	}
}

func TestParseReserved(t *testing.T) {
	got, err := ParseReserved("system-reserved", []string{"cpu=200m,memory=500Mi"})
	if err != nil || got.Cpu().String() != "200m" || got.Memory().String() != "500Mi" {
		t.Errorf("ParseReserved = %v, %v", got, err)
	}
	for bad, want := range map[string]string{
		"cpu":                 `--kube-reserved: "cpu" is not name=quantity`,
		"pid=100":             `--kube-reserved: "pid": staticpod reserves cpu and memory only`,
		"memory=lots":         `--kube-reserved: memory="lots"`,
		"memory=-1Gi":         "not negative",
		"ephemeral-storage=1": "cpu and memory only",
	} {
		if _, err := ParseReserved("kube-reserved", []string{bad}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseReserved(%q) = %v, want an error with %q", bad, err, want)
		}
	}
}
