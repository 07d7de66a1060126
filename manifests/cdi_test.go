package manifests

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// TestCDIDevicesAgreeWithTheCDILibrary: the devices a pod's cdi.k8s.io/ annotations
// request, and which annotations are refused, are what the CDI project's own
// ParseAnnotations (what containerd's CRI calls) makes of them; each device once, in
// the order of the keys.
func TestCDIDevicesAgreeWithTheCDILibrary(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        []string
		wantErr     string // the annotation key the error names; "" for none
	}{
		{"none", nil, nil, ""},
		{"other annotations only", map[string]string{"example.com/x": "example.com/dev=a"}, nil, ""},
		{"one device", map[string]string{"cdi.k8s.io/serial": "example.com/dev=serial0"}, []string{"example.com/dev=serial0"}, ""},
		{"several, in key order, each once", map[string]string{
			"cdi.k8s.io/b": "example.com/dev=serial1,nvidia.com/gpu=0",
			"cdi.k8s.io/a": "example.com/dev=serial0,example.com/dev=serial1",
		}, []string{"example.com/dev=serial0", "example.com/dev=serial1", "nvidia.com/gpu=0"}, ""},
		{"device names may hold colons and dots", map[string]string{"cdi.k8s.io/x": "vendor.io/class=GPU-1.0:a"}, []string{"vendor.io/class=GPU-1.0:a"}, ""},
		{"unqualified", map[string]string{"cdi.k8s.io/serial": "serial0"}, nil, "cdi.k8s.io/serial"},
		{"no class", map[string]string{"cdi.k8s.io/serial": "example.com=serial0"}, nil, "cdi.k8s.io/serial"},
		{"empty", map[string]string{"cdi.k8s.io/serial": ""}, nil, "cdi.k8s.io/serial"},
		{"space after a comma", map[string]string{"cdi.k8s.io/serial": "example.com/dev=a, example.com/dev=b"}, nil, "cdi.k8s.io/serial"},
		{"trailing comma", map[string]string{"cdi.k8s.io/serial": "example.com/dev=a,"}, nil, "cdi.k8s.io/serial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := validPod()
			pod.Annotations = tc.annotations
			got, err := CDIDevices(pod)
			_, lib, libErr := cdi.ParseAnnotations(tc.annotations)
			if (err != nil) != (libErr != nil) {
				t.Errorf("CDIDevices error %v, the CDI library's %v: they must agree", err, libErr)
			}
			slices.Sort(lib)
			if sorted := slices.Sorted(slices.Values(got)); err == nil && !cmp.Equal(sorted, slices.Compact(lib)) {
				t.Errorf("CDIDevices = %v, the CDI library finds %v", got, lib)
			}
			if tc.wantErr == "" {
				if err != nil || !cmp.Equal(got, tc.want) {
					t.Errorf("CDIDevices = %v, %v; want %v", got, err, tc.want)
				}
				if errs := Validate(pod); len(errs) > 0 {
					t.Errorf("Validate: %v, want no error", errs)
				}
				return
			}
			want := "metadata.annotations[" + tc.wantErr + "]: Invalid value"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("CDIDevices error %v, want one at %s", err, want)
			}
			if errs := Validate(pod); len(errs) != 1 || !strings.Contains(errs[0].Error(), want) || !strings.Contains(errs[0].Error(), "vendor.com/class=device") {
				t.Errorf("Validate: %v, want one error at %s saying what a CDI device name is", errs, want)
			}
		})
	}
}
