package manifests

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A pod's fingerprint follows its content, not its UID: a pod whose manifest gives its
// UID keeps the UID through an edit, and only the fingerprint tells the edit apart.
func TestFingerprintChangesWithContentUnderAGivenUID(t *testing.T) {
	loaded := func(edit func(*corev1.Pod)) *corev1.Pod {
		pod := identityPod()
		pod.UID = "5b9a2f0e-1c1d-4c8e-9a53-0e2c1b7d9f11"
		edit(pod)
		Identify(pod, "node1", Source{Kind: SourceFile, Location: "/etc/kubernetes/manifests/web.yaml"})
		return pod
	}
	base := Fingerprint(loaded(func(*corev1.Pod) {}))
	if again := Fingerprint(loaded(func(*corev1.Pod) {})); again != base {
		t.Fatalf("two loads of one pod: fingerprints %s and %s, want equal", base, again)
	}
	for _, tt := range []struct {
		name string
		edit func(*corev1.Pod)
	}{
		{"image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "busybox:1.37" }},
		{"command", func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"true"} }},
		{"env", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}} }},
		{"label", func(p *corev1.Pod) { p.Labels = map[string]string{"tier": "back"} }},
		{"annotation", func(p *corev1.Pod) { p.Annotations = map[string]string{"note": "b"} }},
	} {
		edited := loaded(tt.edit)
		if edited.UID != "5b9a2f0e-1c1d-4c8e-9a53-0e2c1b7d9f11" {
			t.Fatalf("%s edit: UID %s, want the given one kept", tt.name, edited.UID)
		}
		if Fingerprint(edited) == base {
			t.Errorf("Fingerprint after an edit of the %s = the fingerprint before, want another", tt.name)
		}
	}
}
