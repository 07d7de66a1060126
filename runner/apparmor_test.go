package runner

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// On a host without AppArmor, a pod that asks for a profile (in a field or the
// deprecated annotation) is refused as the kubelet refuses it: Failed, reason AppArmor,
// "Cannot enforce AppArmor: AppArmor is not enabled on the host", with an event; one
// that asks for none, or for Unconfined, runs.
func TestAdmitRefusesAppArmorWithoutIt(t *testing.T) {
	h := newHarness(t)
	l := newLoop(h.r, &sync.WaitGroup{})
	l.host = Host{AppArmor: errAppArmorDisabled}
	var spawned []*corev1.Pod
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w.pod) }
	field := testPod(t, "field", "httpd", corev1.RestartPolicyAlways)
	field.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}
	annotated := testPod(t, "annotated", "httpd", corev1.RestartPolicyAlways)
	annotated.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"c"] = "localhost/k8s-web"
	unconfined := testPod(t, "unconfined", "httpd", corev1.RestartPolicyAlways)
	unconfined.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
	plain := testPod(t, "plain", "httpd", corev1.RestartPolicyAlways)
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		t.Fatal(err)
	}
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{field, annotated, unconfined, plain}})

	started := map[string]bool{}
	for _, p := range spawned {
		started[p.Name] = true
	}
	if len(spawned) != 2 || !started[unconfined.Name] || !started[plain.Name] {
		t.Errorf("started %v, want only the pods that ask for no confinement", started)
	}
	const msg = "Cannot enforce AppArmor: AppArmor is not enabled on the host"
	for _, refused := range []*corev1.Pod{field, annotated} {
		var st corev1.PodStatus
		for _, p := range h.r.Pods() {
			if p.UID == refused.UID {
				st = p.Status
			}
		}
		if st.Phase != corev1.PodFailed || st.Reason != ReasonAppArmor || st.Message != msg {
			t.Errorf("status of %s: %s %q %q, want Failed %q %q", refused.Name, st.Phase, st.Reason, st.Message, ReasonAppArmor, msg)
		}
		if evs := h.r.events.Pod(refused.UID); len(evs) != 1 || evs[0].Reason != ReasonAppArmor || evs[0].Message != msg {
			t.Errorf("events of %s: %+v", refused.Name, evs)
		}
	}
}

// The host check is the kubelet's: AppArmor's securityfs present and the module's
// enabled parameter Y.
func TestAppArmorEnabledReadsSysfs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fs      bool   // kernel/security/apparmor exists
		enabled string // module/apparmor/parameters/enabled; "" for none
		want    error
	}{
		{"enabled", true, "Y\n", nil},
		{"module disabled", true, "N\n", errAppArmorDisabled},
		{"no module", true, "", errAppArmorDisabled},
		{"no securityfs", false, "Y\n", errAppArmorDisabled},
	} {
		sys := t.TempDir()
		if tc.fs {
			if err := os.MkdirAll(filepath.Join(sys, "kernel/security/apparmor"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if tc.enabled != "" {
			p := filepath.Join(sys, "module/apparmor/parameters/enabled")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(tc.enabled), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := appArmorEnabled(sys); got != tc.want {
			t.Errorf("appArmorEnabled(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
