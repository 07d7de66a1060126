package restrict

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

// restrictedPod is a pod of source with one container, changed by edit.
func restrictedPod(uid, source string, edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{}
	p.UID, p.Name, p.Namespace = types.UID(uid), uid, "default"
	p.Annotations = map[string]string{manifests.AnnotationSource: source, manifests.AnnotationLocation: source + ":" + uid}
	p.Spec.Containers = []corev1.Container{{Name: "c"}}
	edit(p)
	return p
}

func TestRestrictionsCheck(t *testing.T) {
	yes := true
	privileged := func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &yes} }
	privilegedInit := func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "i", SecurityContext: &corev1.SecurityContext{Privileged: &yes}}}
	}
	hostNet := func(p *corev1.Pod) { p.Spec.HostNetwork = true }
	hostPID := func(p *corev1.Pod) { p.Spec.HostPID = true }
	hostIPC := func(p *corev1.Pod) { p.Spec.HostIPC = true }
	hostPath := func(dir string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{
				{Name: "ok", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}},
			}
		}
	}
	fileOnly := []string{manifests.SourceFile}
	tests := []struct {
		name     string
		restrict Restrictions
		pod      *corev1.Pod
		want     string // the message, "" when allowed
	}{
		{"nothing restricted", Restrictions{}, restrictedPod("a", "api", func(p *corev1.Pod) { privileged(p); hostNet(p); hostPath("/")(p) }), ""},
		{"privileged from an allowed source", Restrictions{PrivilegedSources: fileOnly}, restrictedPod("a", "file", privileged), ""},
		{"privileged from another source", Restrictions{PrivilegedSources: fileOnly}, restrictedPod("a", "api", privileged),
			`spec.containers[0].securityContext.privileged: a privileged container is not allowed for pods from source "api" (--privileged-sources)`},
		{"privileged init container", Restrictions{PrivilegedSources: []string{}}, restrictedPod("a", "file", privilegedInit),
			`spec.initContainers[0].securityContext.privileged: a privileged container is not allowed for pods from source "file" (--privileged-sources)`},
		{"privileged: false", Restrictions{PrivilegedSources: []string{}}, restrictedPod("a", "file", func(p *corev1.Pod) {
			no := false
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &no}
		}), ""},
		{"a star allows all", Restrictions{PrivilegedSources: []string{"api", AllSources}}, restrictedPod("a", "http", privileged), ""},
		{"host network", Restrictions{HostNetworkSources: fileOnly}, restrictedPod("a", "http", hostNet),
			`spec.hostNetwork: the host's network is not allowed for pods from source "http" (--host-network-sources)`},
		{"host PID", Restrictions{HostPIDSources: fileOnly}, restrictedPod("a", "api", hostPID),
			`spec.hostPID: the host's PID namespace is not allowed for pods from source "api" (--host-pid-sources)`},
		{"host IPC", Restrictions{HostIPCSources: fileOnly}, restrictedPod("a", "api", hostIPC),
			`spec.hostIPC: the host's IPC namespace is not allowed for pods from source "api" (--host-ipc-sources)`},
		{"host IPC from file", Restrictions{HostIPCSources: fileOnly}, restrictedPod("a", "file", hostIPC), ""},
		{"no source annotation", Restrictions{HostNetworkSources: fileOnly}, restrictedPod("a", "", hostNet),
			`spec.hostNetwork: the host's network is not allowed for pods from source "unknown" (--host-network-sources)`},
		{"host path under a prefix", Restrictions{AllowedHostPaths: []string{"/srv", "/var/lib/etcd/"}}, restrictedPod("a", "file", hostPath("/var/lib/etcd/member")), ""},
		{"host path equal to a prefix", Restrictions{AllowedHostPaths: []string{"/srv"}}, restrictedPod("a", "file", hostPath("/srv/")), ""},
		{"host path sharing letters", Restrictions{AllowedHostPaths: []string{"/srv"}}, restrictedPod("a", "file", hostPath("/srvx")),
			"spec.volumes[1].hostPath.path: host path /srvx is outside --allowed-host-paths"},
		{"host path climbing out", Restrictions{AllowedHostPaths: []string{"/srv"}}, restrictedPod("a", "file", hostPath("/srv/../etc")),
			"spec.volumes[1].hostPath.path: host path /srv/../etc is outside --allowed-host-paths"},
		{"no host path allowed", Restrictions{AllowedHostPaths: []string{}}, restrictedPod("a", "file", hostPath("/srv")),
			"spec.volumes[1].hostPath.path: host path /srv is outside --allowed-host-paths"},
		{"root allows all", Restrictions{AllowedHostPaths: []string{"/"}}, restrictedPod("a", "file", hostPath("/etc")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if f := tt.restrict.Check(tt.pod); f != nil {
				got = f.Message(tt.pod)
			}
			if got != tt.want {
				t.Errorf("Check = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRestrictionsValidate(t *testing.T) {
	for _, tt := range []struct {
		r    Restrictions
		want string
	}{
		{Restrictions{PrivilegedSources: []string{"file", "http", "api", "*"}, AllowedHostPaths: []string{"/srv"}}, ""},
		{Restrictions{HostPIDSources: []string{"apiserver"}}, `--host-pid-sources: unknown source "apiserver": use file, http, api or *`},
		{Restrictions{AllowedHostPaths: []string{"srv"}}, `--allowed-host-paths: "srv" is not an absolute path`},
	} {
		got := ""
		if err := tt.r.Validate(); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("Validate(%+v) = %q, want %q", tt.r, got, tt.want)
		}
	}
}
