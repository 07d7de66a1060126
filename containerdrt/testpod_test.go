package containerdrt

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/containerdrt/spec"
)

// The pods, inputs and files the integration tests of specs and mounts run, as the
// unit tests of packages poddir and spec make them.

// testPod is a defaulted pod with one container, as package manifests hands them over.
func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: "uid-" + "1234"},
		Spec: corev1.PodSpec{
			DNSPolicy:  corev1.DNSClusterFirst,
			Containers: []corev1.Container{{Name: "app", Image: "busybox", TerminationMessagePath: "/dev/termination-log"}},
		},
	}
}

// specTestInput is a defaulted pod "web" with one container "app" running image, with
// the hostname the pod directory's preparation would give it. It mounts nothing: the
// tests that use it build no mounts.
func specTestInput(image ocispec.ImageConfig) spec.Input {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-node1", Namespace: "prod", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"example.com/owner": "ops"},
		},
		Spec: corev1.PodSpec{
			NodeName:           "node1",
			ServiceAccountName: "default",
			Containers:         []corev1.Container{{Name: "app", Image: "busybox"}},
		},
	}
	return spec.Input{
		Pod: pod, Container: &pod.Spec.Containers[0], Image: image,
		PodIP: "10.0.0.7", HostIP: "192.168.1.2",
		Prepared: spec.Prepared{Hostname: "web-node1"},
	}
}

func specResourceList(cpu, memory string) corev1.ResourceList {
	list := corev1.ResourceList{}
	if cpu != "" {
		list[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		list[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return list
}

func specContainerSC(in spec.Input) *corev1.SecurityContext {
	if in.Container.SecurityContext == nil {
		in.Container.SecurityContext = &corev1.SecurityContext{}
	}
	return in.Container.SecurityContext
}

func specPodSC(in spec.Input) *corev1.PodSecurityContext {
	if in.Pod.Spec.SecurityContext == nil {
		in.Pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	return in.Pod.Spec.SecurityContext
}

func downwardFieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

func downwardResourceEnv(name, container, res, divisor string) corev1.EnvVar {
	ref := &corev1.ResourceFieldSelector{ContainerName: container, Resource: res}
	if divisor != "" {
		ref.Divisor = resource.MustParse(divisor)
	}
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: ref}}
}

func localhostSeccompProfile(name string) *corev1.SeccompProfile {
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &name}
}

func mustWriteSpecFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustWriteFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustReadFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// mountsAt lists the mounts at or below dir.
func mountsAt(t *testing.T, dir string) []*mountinfo.Info {
	t.Helper()
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Fatal(err)
	}
	return mounts
}

func describeMounts(mounts []*mountinfo.Info) []string {
	var out []string
	for _, m := range mounts {
		out = append(out, m.FSType+" "+m.Mountpoint+" "+m.VFSOptions)
	}
	return out
}
