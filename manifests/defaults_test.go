package manifests

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestDefault(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		HostNetwork: true,
		Volumes: []corev1.Volume{
			{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}},
			{Name: "none"},
			{Name: "latest", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/data"}}},
			{Name: "tagged", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/data:1"}}},
		},
		Containers: []corev1.Container{{
			Name:  "c",
			Image: "registry:5000/app",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("0.0001")},
			},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
			Env:           []corev1.EnvVar{{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		}},
	}}
	Default(pod)
	want := &corev1.Pod{Spec: corev1.PodSpec{
		HostNetwork:                   true,
		RestartPolicy:                 corev1.RestartPolicyAlways,
		DNSPolicy:                     corev1.DNSClusterFirst,
		SecurityContext:               &corev1.PodSecurityContext{},
		TerminationGracePeriodSeconds: ptr(int64(30)),
		SchedulerName:                 "default-scheduler",
		EnableServiceLinks:            ptr(true),
		Volumes: []corev1.Volume{
			{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x", Type: ptr(corev1.HostPathUnset)}}},
			{Name: "none", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "latest", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/data", PullPolicy: corev1.PullAlways}}},
			{Name: "tagged", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/data:1", PullPolicy: corev1.PullIfNotPresent}}},
		},
		Containers: []corev1.Container{{
			Name:                     "c",
			Image:                    "registry:5000/app",
			ImagePullPolicy:          corev1.PullAlways,
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			Ports:                    []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080, Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("1m")},
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("1m")},
			},
			LivenessProbe: &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Scheme: corev1.URISchemeHTTP, Port: intstr.FromInt32(8080)}},
				TimeoutSeconds:   1,
				PeriodSeconds:    10,
				SuccessThreshold: 1,
				FailureThreshold: 3,
			},
			Env: []corev1.EnvVar{{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
		}},
	}}
	want.Namespace = "default"
	if diff := cmp.Diff(want, pod, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("Default (-want +got):\n%s", diff)
	}
	again := pod.DeepCopy()
	Default(again)
	if diff := cmp.Diff(pod, again); diff != "" {
		t.Errorf("Default is not idempotent (-first +second):\n%s", diff)
	}
}

func TestImageTag(t *testing.T) {
	tests := map[string]string{
		"busybox":                       "latest",
		"busybox:1.36":                  "1.36",
		"busybox:latest":                "latest",
		"localhost:5000/busybox":        "latest",
		"localhost:5000/busybox:1":      "1",
		"busybox@sha256:abcd":           "",
		"busybox:1.36@sha256:abcd":      "1.36",
		"registry.k8s.io/etcd:3.5.15-0": "3.5.15-0",
	}
	for in, want := range tests {
		if got := imageTag(in); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", in, got, want)
		}
	}
}
