package cli

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// renderedLines renders pod with describe and returns its lines, each with its runs of
// blanks (the tab writer's alignment) cut to one space.
func renderedLines(t *testing.T, pod *corev1.Pod) map[string]bool {
	t.Helper()
	var out bytes.Buffer
	if err := describePod(&out, pod, nil, nil, cliNow); err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, line := range strings.Split(out.String(), "\n") {
		lines[strings.Join(strings.Fields(line), " ")] = true
	}
	return lines
}

// TestDescribeObjectsAsKubectlDoes: an environment variable fed by a ConfigMap or a
// Secret key reads as kubectl writes it, and a mount of a volume that is read-only
// whatever the mount says (configMap, secret, projected, downwardAPI) shows (ro).
func TestDescribeObjectsAsKubectlDoes(t *testing.T) {
	yes := true
	pod := etcdPod()
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{
		{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Key: "greeting"}}},
		{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password", Optional: &yes}}},
	}
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/app"},
		{Name: "secret", MountPath: "/etc/secret"},
		{Name: "projected", MountPath: "/etc/projected"},
		{Name: "downward", MountPath: "/etc/podinfo", SubPath: "labels"},
		{Name: "scratch", MountPath: "/scratch"},
		{Name: "certs", MountPath: "/certs", ReadOnly: true},
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
		corev1.Volume{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}},
		corev1.Volume{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
		corev1.Volume{Name: "downward", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	)
	lines := renderedLines(t, pod)
	for _, want := range []string{
		"GREETING: <set to the key 'greeting' of config map 'app-config'> Optional: false",
		"PASSWORD: <set to the key 'password' in secret 'db'> Optional: true",
		"/etc/app from config (ro)",
		"/etc/secret from secret (ro)",
		"/etc/projected from projected (ro)",
		`/etc/podinfo from downward (ro,path="labels")`,
		"/scratch from scratch (rw)",
		"/certs from certs (ro)",
	} {
		if !lines[want] {
			t.Errorf("describe has no line %q", want)
		}
	}
	if t.Failed() {
		var out bytes.Buffer
		describePod(&out, pod, nil, nil, cliNow)
		t.Logf("describe:\n%s", out.String())
	}
}
