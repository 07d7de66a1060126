package spec

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/runner"
)

func TestObjectEnv(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{})
	in.Pod.Namespace = "kube-system"
	in.Objects = podtest.Objects("fast")
	c := in.Container
	c.EnvFrom = []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}, Prefix: "APP_"},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: new(true)}},
	}
	c.Env = []corev1.EnvVar{
		{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
		{Name: "APP_mode", Value: "override"},
		{Name: "UNSET", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "nope", Optional: new(true)}}},
	}
	env, err := containerEnv(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"APP_app.conf=level=info\n", "APP_mode=override", "PASSWORD=s3cret"}
	if diff := cmp.Diff(want, env.strings()); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}

	c.Env = []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "nope"}}}}
	if _, err := containerEnv(in); err == nil || !strings.Contains(err.Error(), "couldn't find key nope in ConfigMap kube-system/app") || !errors.Is(err, runner.ErrCreateConfig) {
		t.Errorf("env with a missing key = %v, want a CreateContainerConfigError naming it", err)
	}
	c.Env = nil
	c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}}}
	if _, err := containerEnv(in); err == nil || !strings.Contains(err.Error(), `secret "gone" not found`) || !errors.Is(err, runner.ErrCreateConfig) {
		t.Errorf("envFrom a missing Secret = %v, want a CreateContainerConfigError naming it", err)
	}
}
