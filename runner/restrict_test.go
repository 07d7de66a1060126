package runner

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// restrictedPod is sourcePod with one container, changed by edit.
func restrictedPod(uid, source string, edit func(*corev1.Pod)) *corev1.Pod {
	p := sourcePod(uid, uid, source)
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

// A pod that asks for what its source may not have is refused: Failed with the
// kubelet's reason Forbidden, a message and an event naming the flag, no worker; a
// forbidden pod holds no host port, so another pod may have it; and once its manifest
// asks for nothing forbidden, the new pod runs.
func TestForbiddenPodIsRefused(t *testing.T) {
	h := newHarness(t)
	h.r.opts.Restrictions = Restrictions{HostNetworkSources: []string{manifests.SourceFile}}
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	forbidden := testPod(t, "a-net", "httpd", corev1.RestartPolicyAlways)
	forbidden.Annotations[manifests.AnnotationSource] = manifests.SourceAPI
	forbidden.Spec.HostNetwork = true
	other := testPod(t, "b-port", "httpd", corev1.RestartPolicyAlways)
	other.Annotations[manifests.AnnotationSource] = manifests.SourceAPI
	for _, p := range []*corev1.Pod{forbidden, other} {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
	}
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		t.Fatal(err)
	}
	l.apply(h.ctx, manifests.Update{Source: manifests.SourceAPI, Pods: []*corev1.Pod{forbidden, other}})
	if len(spawned) != 1 || spawned[0].uid != other.UID {
		t.Fatalf("%d workers, want one, for the pod that is allowed (the forbidden one must not hold its port)", len(spawned))
	}
	var st corev1.PodStatus
	for _, p := range h.r.Pods() {
		if p.UID == forbidden.UID {
			st = p.Status
		}
	}
	want := `Pod was rejected: spec.hostNetwork: the host's network is not allowed for pods from source "api" (--host-network-sources)`
	if st.Phase != corev1.PodFailed || st.Reason != ReasonForbidden || st.Message != want {
		t.Errorf("status of the forbidden pod: %s %q %q; want Failed %q %q", st.Phase, st.Reason, st.Message, ReasonForbidden, want)
	}
	evs := h.r.events.Pod(forbidden.UID)
	if len(evs) != 1 || evs[0].Reason != ReasonForbidden || evs[0].Type != EventWarning || !strings.Contains(evs[0].Message, "--host-network-sources") {
		t.Errorf("events of the forbidden pod: %+v", evs)
	}

	fixed := testPod(t, "a-net", "httpd", corev1.RestartPolicyAlways) // the same name, no host network
	fixed.Annotations[manifests.AnnotationSource] = manifests.SourceAPI
	l.apply(h.ctx, manifests.Update{Source: manifests.SourceAPI, Pods: []*corev1.Pod{fixed, other}})
	if len(spawned) != 2 || spawned[1].uid != fixed.UID {
		t.Fatalf("after the manifest was fixed: %d workers, want the fixed pod's", len(spawned))
	}
	for _, p := range h.r.Pods() {
		if p.Status.Reason == ReasonForbidden {
			t.Errorf("pod %s still shows a refusal", p.Name)
		}
	}
}

// A manifest cannot claim a source it did not come from: the source annotation is
// staticpod's, so a pushed pod that says it is a file's is still refused as the push
// source's.
func TestSourceCannotBeClaimed(t *testing.T) {
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: claim\n  annotations: {kubernetes.io/config.source: file}\n" +
		"spec: {hostPID: true, containers: [{name: c, image: busybox:1.36}]}\n"
	res := manifests.Load([]byte(manifest), manifests.Options{NodeName: "n", Source: manifests.Source{Kind: manifests.SourceAPI, Location: "claim"}})
	if len(res.Errors) > 0 || len(res.Pods) != 1 {
		t.Fatalf("Load: %v", res.Errors)
	}
	f := Restrictions{HostPIDSources: []string{manifests.SourceFile}}.Check(res.Pods[0])
	if f == nil || f.Flag != FlagHostPIDSources {
		t.Errorf("a pushed pod claiming the file source was allowed the host's PID namespace: %+v", f)
	}
}
