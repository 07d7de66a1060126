package runner

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/events"
)

const pullSecretsManifest = `apiVersion: v1
kind: Secret
metadata: {name: regcred}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths": {"registry.example.com": {"username": "puller", "password": "s3cret-value"}}}'
---
apiVersion: v1
kind: Secret
metadata: {name: plain}
stringData: {password: s3cret-value}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  imagePullSecrets: [{name: gone}, {name: plain}, {name: regcred}]
  containers: [{name: c, image: registry.example.com/app:1}]
`

// TestPullSecretsBesideThePodReachThePull: the Secret the pod names, given beside it,
// goes with the pull of its image; a missing one and one of another type are warned of
// (the kubelet's event, naming them) and the pull goes on. No value reaches the events
// or the log.
func TestPullSecretsBesideThePodReachThePull(t *testing.T) {
	h := newHarness(t)
	var logged bytes.Buffer
	h.r.log = slog.New(slog.NewTextHandler(&logged, nil))
	res := manifests.Load([]byte(pullSecretsManifest), manifests.Options{NodeName: "n", Source: manifests.Source{Kind: manifests.SourceFile, Location: "web.yaml"}})
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	pod := res.Pods[0]
	h.r.pub.seen[pod.UID] = t0
	h.setObjects(manifests.SourceFile, res.Objects())
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)

	h.f.mu.Lock()
	pulls := h.f.pulls
	h.f.mu.Unlock()
	if len(pulls) != 1 {
		t.Fatalf("%d pulls, want 1", len(pulls))
	}
	var got []string
	for _, s := range pulls[0].Secrets {
		got = append(got, s.Namespace+"/"+s.Name)
	}
	if diff := cmp.Diff([]string{"default/regcred"}, got); diff != "" {
		t.Errorf("secrets of the pull (-want +got):\n%s", diff)
	}
	if pulls[0].Image != "registry.example.com/app:1" || pulls[0].Policy != "IfNotPresent" {
		t.Errorf("pull = %s %s, want registry.example.com/app:1 IfNotPresent", pulls[0].Image, pulls[0].Policy)
	}
	if n := h.f.count("CreateContainer"); n != 1 {
		t.Errorf("CreateContainer called %d times, want 1: a missing pull secret does not stop the pod", n)
	}

	var warned []string
	for _, e := range h.r.events.Pod(pod.UID) {
		if e.Reason == ReasonFailedToRetrieveImagePullSecret && e.Type == events.Warning && e.Container == "" {
			warned = append(warned, e.Message)
		}
	}
	want := []string{
		"Unable to retrieve some image pull secrets (gone); attempting to pull the image may not succeed.",
		"Some image pull secrets (plain) are not of type kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg and hold no registry credentials; attempting to pull the image may not succeed.",
	}
	if diff := cmp.Diff(want, warned); diff != "" {
		t.Errorf("pod events %s (-want +got):\n%s", ReasonFailedToRetrieveImagePullSecret, diff)
	}
	events, _ := json.Marshal(h.r.events.Pod(pod.UID))
	for what, text := range map[string]string{"events": string(events), "log": logged.String()} {
		if strings.Contains(text, "s3cret") || strings.Contains(text, "puller") {
			t.Errorf("the %s hold a secret's value:\n%s", what, text)
		}
	}
	if !strings.Contains(logged.String(), "pull secrets (gone)") || !strings.Contains(logged.String(), "pod=default/web-n") {
		t.Errorf("the log does not name the missing secret and the pod:\n%s", logged.String())
	}
}
