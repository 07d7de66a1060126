package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	corev1 "k8s.io/api/core/v1"
)

// cgroupValues are the resource fields Resources sets, nil where unset.
type cgroupValues struct {
	Shares *uint64
	Quota  *int64
	Period *uint64
	Memory *int64
	Swap   *int64
}

func cgroupValuesOf(s *specs.Spec) cgroupValues {
	var v cgroupValues
	if r := s.Linux.Resources; r != nil {
		if r.CPU != nil {
			v.Shares, v.Quota, v.Period = r.CPU.Shares, r.CPU.Quota, r.CPU.Period
		}
		if r.Memory != nil {
			v.Memory, v.Swap = r.Memory.Limit, r.Memory.Swap
		}
	}
	return v
}

func TestResourceOpts(t *testing.T) {
	const period = uint64(100000)
	for _, tc := range []struct {
		name             string
		requests, limits corev1.ResourceList
		shares           uint64
		quota            int64 // 0: no quota nor period
		memory           int64 // 0: no limit
	}{
		{name: "none: best effort", shares: 2},
		{name: "100m", requests: podtest.Resources("100m", ""), limits: podtest.Resources("100m", ""), shares: 102, quota: 10000},
		{name: "0.5", requests: podtest.Resources("0.5", ""), limits: podtest.Resources("0.5", ""), shares: 512, quota: 50000},
		{name: "2", requests: podtest.Resources("2", ""), limits: podtest.Resources("2", ""), shares: 2048, quota: 200000},
		{name: "1m: floors", requests: podtest.Resources("1m", ""), limits: podtest.Resources("1m", ""), shares: 2, quota: 1000},
		{name: "request only", requests: podtest.Resources("300m", ""), shares: 307},
		{name: "limit only: shares from limit", limits: podtest.Resources("250m", ""), shares: 256, quota: 25000},
		{name: "request below limit", requests: podtest.Resources("100m", ""), limits: podtest.Resources("1", ""), shares: 102, quota: 100000},
		{name: "above the shares ceiling", requests: podtest.Resources("300", ""), limits: podtest.Resources("300", ""), shares: 262144, quota: 30000000},
		{name: "memory", requests: podtest.Resources("", "64Mi"), limits: podtest.Resources("", "128Mi"), shares: 2, memory: 128 << 20},
		{name: "memory in decimal units", limits: podtest.Resources("", "1G"), shares: 2, memory: 1000000000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{})
			in.Container.Resources = corev1.ResourceRequirements{Requests: tc.requests, Limits: tc.limits}
			opts, err := Resources(in)
			if err != nil {
				t.Fatalf("Resources: %v", err)
			}
			want := cgroupValues{Shares: &tc.shares}
			if tc.quota != 0 {
				want.Quota, want.Period = &tc.quota, new(period)
			}
			if tc.memory != 0 {
				want.Memory = &tc.memory
				if SwapAccounted() {
					want.Swap = &tc.memory
				}
			}
			if diff := cmp.Diff(want, cgroupValuesOf(specFromOpts(t, "", opts))); diff != "" {
				t.Errorf("cgroup values (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMemTotal(t *testing.T) {
	got, err := parseMemTotal([]byte("MemFree:  100 kB\nMemTotal:       24684100 kB\nSwapTotal: 0 kB\n"))
	if want := int64(24684100 * 1024); err != nil || got != want {
		t.Errorf("parseMemTotal = %d, %v; want %d, nil", got, err, want)
	}
	if _, err := parseMemTotal([]byte("MemFree: 1 kB\n")); err == nil {
		t.Error("parseMemTotal without MemTotal succeeded, want an error")
	}
}
