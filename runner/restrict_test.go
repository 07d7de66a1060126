package runner

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/events"
	"github.com/staticpod/staticpod/runner/restrict"
)

// restrictedPod is sourcePod with one container, changed by edit.
func restrictedPod(uid, source string, edit func(*corev1.Pod)) *corev1.Pod {
	p := sourcePod(uid, uid, source)
	p.Spec.Containers = []corev1.Container{{Name: "c"}}
	edit(p)
	return p
}

// A pod that asks for what its source may not have is refused: Failed with the
// kubelet's reason restrict.Forbidden, a message and an event naming the flag, no worker; a
// forbidden pod holds no host port, so another pod may have it; and once its manifest
// asks for nothing forbidden, the new pod runs.
func TestForbiddenPodIsRefused(t *testing.T) {
	h := newHarness(t)
	h.r.opts.Restrictions = restrict.Restrictions{HostNetworkSources: []string{manifests.SourceFile}}
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
	if st.Phase != corev1.PodFailed || st.Reason != restrict.ReasonForbidden || st.Message != want {
		t.Errorf("status of the forbidden pod: %s %q %q; want Failed %q %q", st.Phase, st.Reason, st.Message, restrict.ReasonForbidden, want)
	}
	evs := h.r.events.Pod(forbidden.UID)
	if len(evs) != 1 || evs[0].Reason != restrict.ReasonForbidden || evs[0].Type != events.Warning || !strings.Contains(evs[0].Message, "--host-network-sources") {
		t.Errorf("events of the forbidden pod: %+v", evs)
	}

	fixed := testPod(t, "a-net", "httpd", corev1.RestartPolicyAlways) // the same name, no host network
	fixed.Annotations[manifests.AnnotationSource] = manifests.SourceAPI
	l.apply(h.ctx, manifests.Update{Source: manifests.SourceAPI, Pods: []*corev1.Pod{fixed, other}})
	if len(spawned) != 2 || spawned[1].uid != fixed.UID {
		t.Fatalf("after the manifest was fixed: %d workers, want the fixed pod's", len(spawned))
	}
	for _, p := range h.r.Pods() {
		if p.Status.Reason == restrict.ReasonForbidden {
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
	f := restrict.Restrictions{HostPIDSources: []string{manifests.SourceFile}}.Check(res.Pods[0])
	if f == nil || f.Flag != restrict.FlagHostPIDSources {
		t.Errorf("a pushed pod claiming the file source was allowed the host's PID namespace: %+v", f)
	}
}
