package spec

import (
	"errors"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestAppArmorProfile: the profile a container runs under, as containerd's CRI
// decides it from what the kubelet passes (field, else annotation, else the pod's).
func TestAppArmorProfile(t *testing.T) {
	local := &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: new("k8s-web")}
	for _, tc := range []struct {
		name        string
		profile     *corev1.AppArmorProfile // the container's
		annotation  string                  // the deprecated annotation's value, "" for none
		privileged  bool
		enabled     bool
		want        string
		wantDefault bool
		wantErr     error
	}{
		{name: "none: containerd's default", enabled: true, want: DefaultAppArmorProfile, wantDefault: true},
		{name: "RuntimeDefault", profile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}, enabled: true, want: DefaultAppArmorProfile, wantDefault: true},
		{name: "privileged: none", privileged: true, enabled: true},
		{name: "privileged RuntimeDefault: none", profile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}, privileged: true, enabled: true},
		{name: "Localhost", profile: local, enabled: true, want: "k8s-web"},
		{name: "privileged Localhost", profile: local, privileged: true, enabled: true, want: "k8s-web"},
		{name: "annotation", annotation: "localhost/k8s-db", enabled: true, want: "k8s-db"},
		{name: "Unconfined", profile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}, enabled: true},
		{name: "annotation unconfined", annotation: "unconfined", enabled: true},
		{name: "disabled: none", enabled: false},
		{name: "disabled Unconfined", profile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}},
		{name: "disabled Localhost", profile: local, wantErr: errAppArmorUnsupported},
		{name: "disabled annotation", annotation: "runtime/default", wantErr: errAppArmorUnsupported},
	} {
		in := specTestInput(ocispec.ImageConfig{})
		if tc.profile != nil {
			specContainerSC(in).AppArmorProfile = tc.profile
		}
		if tc.privileged {
			specContainerSC(in).Privileged = new(true)
		}
		if tc.annotation != "" {
			in.Pod.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app": tc.annotation}
		}
		name, isDefault, err := AppArmorProfile(in.Pod, in.Container, tc.enabled)
		if name != tc.want || isDefault != tc.wantDefault || !errors.Is(err, tc.wantErr) {
			t.Errorf("AppArmorProfile(%s) = %q, %v, %v; want %q, %v, %v", tc.name, name, isDefault, err, tc.want, tc.wantDefault, tc.wantErr)
		}
	}
}

// TestSecurityAppArmor: the resolved profile reaches the process; none leaves it unset.
func TestSecurityAppArmor(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{})
	if got := mustSecuritySpec(t, in).Process.ApparmorProfile; got != "" {
		t.Errorf("no profile: process.apparmorProfile = %q, want none", got)
	}
	in.AppArmorProfile = "k8s-web"
	if got := mustSecuritySpec(t, in).Process.ApparmorProfile; got != "k8s-web" {
		t.Errorf("process.apparmorProfile = %q, want k8s-web", got)
	}
}
