// Package podtest holds what the tests of containerdrt and of the packages along its
// seams (spec, poddir) build their pods from, and read their results with: defaulted
// pods, their ConfigMaps and Secrets, resource lists, downward API and seccomp
// references, files, mounts. It is for tests only; it imports only manifests, so that
// the tests of any package below containerdrt may use it.
package podtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
	"github.com/staticpod/staticpod/manifests"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod is a defaulted pod with one container "app", as package manifests hands them
// over.
func Pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: "uid-" + "1234"},
		Spec: corev1.PodSpec{
			DNSPolicy:  corev1.DNSClusterFirst,
			Containers: []corev1.Container{{Name: "app", Image: "busybox", TerminationMessagePath: "/dev/termination-log"}},
		},
	}
}

// Resources is a resource list of the cpu and memory given; "" leaves one out.
func Resources(cpu, memory string) corev1.ResourceList {
	list := corev1.ResourceList{}
	if cpu != "" {
		list[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		list[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return list
}

// FieldEnv is an environment variable from a field of the pod (the downward API).
func FieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

// ResourceEnv is an environment variable from a container's resource (the downward
// API); "" leaves the divisor unset.
func ResourceEnv(name, container, res, divisor string) corev1.EnvVar {
	ref := &corev1.ResourceFieldSelector{ContainerName: container, Resource: res}
	if divisor != "" {
		ref.Divisor = resource.MustParse(divisor)
	}
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: ref}}
}

// LocalhostSeccomp is a Localhost seccomp profile of the given file.
func LocalhostSeccomp(name string) *corev1.SeccompProfile {
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &name}
}

// WriteFile writes content at path, making its directory, or fails t.
func WriteFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadFile returns the content of path, or fails t.
func ReadFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// MountsAt lists the mounts at or below dir.
func MountsAt(t *testing.T, dir string) []*mountinfo.Info {
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

// DescribeMounts is each mount's type, mount point and options, one string a mount.
func DescribeMounts(mounts []*mountinfo.Info) []string {
	var out []string
	for _, m := range mounts {
		out = append(out, m.FSType+" "+m.Mountpoint+" "+m.VFSOptions)
	}
	return out
}

// Objects are the ConfigMap app (keys mode and app.conf) and the Secret creds (key
// password) of namespace kube-system, Pod's.
func Objects(mode string) manifests.Objects {
	res := manifests.Load([]byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: kube-system}
data: {mode: `+mode+`, app.conf: "level=info\n"}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: kube-system}
stringData: {password: s3cret}
`), manifests.Options{NodeName: "n"})
	return res.Objects()
}
