package runner

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/manifests"
)

const objectsManifest = `apiVersion: v1
kind: ConfigMap
metadata: {name: web}
data: {mode: MODE}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: s3cret-value}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: c
    image: busybox
    volumeMounts: [{name: cfg, mountPath: /cfg}]
  volumes:
  - name: cfg
    configMap: {name: web}
`

// loadObjects loads objectsManifest with the ConfigMap's mode set to mode, as the file
// source would send it.
func loadObjects(t *testing.T, mode string) manifests.Result {
	t.Helper()
	res := manifests.Load([]byte(strings.Replace(objectsManifest, "MODE", mode, 1)), manifests.Options{NodeName: "n", Source: manifests.Source{Kind: manifests.SourceFile, Location: "web.yaml"}})
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	return res
}

func (h *harness) setObjects(source string, objs manifests.Objects) {
	h.r.pub.setObjects(source, objs)
}

func (h *harness) mode(res manifests.Result) string {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	data, _ := h.f.volumes[res.Pods[0].UID].Data(manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: "default", Name: "web"})
	return string(data["mode"])
}

// TestVolumesFollowObjects: a container is created with its source's objects; once
// it runs, an edit of a ConfigMap it reads reaches its volumes without restarting it,
// the runtime is asked only when what the pod reads changed, and a failing volume is
// told once.
func TestVolumesFollowObjects(t *testing.T) {
	h := newHarness(t)
	v1 := loadObjects(t, "fast")
	pod := v1.Pods[0]
	h.r.pub.seen[pod.UID] = t0
	h.setObjects(manifests.SourceFile, v1.Objects())
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	if got := h.mode(v1); got != "fast" {
		t.Fatalf("container created with mode %q, want fast", got)
	}
	h.sync(w)
	h.sync(w)
	if n := h.f.count("SyncVolumes"); n != 1 {
		t.Errorf("SyncVolumes called %d times with nothing changed, want 1 (the first sync of a running pod)", n)
	}

	v2 := loadObjects(t, "slow")
	if v2.Pods[0].UID != pod.UID {
		t.Fatal("an edit of a ConfigMap changed the pod's UID")
	}
	h.setObjects(manifests.SourceFile, v2.Objects())
	h.sync(w)
	if got, n := h.mode(v2), h.f.count("SyncVolumes"); got != "slow" || n != 2 {
		t.Errorf("after the edit: volumes hold mode %q after %d SyncVolumes, want slow after 2", got, n)
	}
	if n := h.f.count("CreateContainer"); n != 1 {
		t.Errorf("CreateContainer called %d times, want 1: an edit of a ConfigMap restarts nothing", n)
	}

	h.f.mu.Lock()
	h.f.fail["SyncVolumes"] = errors.New(`volume "cfg": configmap "web" not found`)
	h.f.mu.Unlock()
	h.setObjects(manifests.SourceFile, manifests.NewObjects())
	h.sync(w)
	h.sync(w)
	var mounts int
	for _, e := range h.r.events.Pod(pod.UID) {
		if e.Reason == ReasonFailedMount {
			mounts++
		}
	}
	if mounts != 1 {
		t.Errorf("%d FailedMount events over two failing syncs, want 1", mounts)
	}
}

// TestSecretsNeverShowValues: the listings carry names and keys, never a value.
func TestSecretsNeverShowValues(t *testing.T) {
	h := newHarness(t)
	h.setObjects(manifests.SourceAPI, loadObjects(t, "fast").Objects())
	want := []Object{{Kind: "Secret", Namespace: "default", Name: "creds", Source: "api", Type: "Opaque", Keys: []string{"password"}}}
	if diff := cmp.Diff(want, h.r.Secrets()); diff != "" {
		t.Errorf("Secrets (-want +got):\n%s", diff)
	}
	js, err := json.Marshal(h.r.Secrets())
	if err != nil || strings.Contains(string(js), "s3cret") {
		t.Errorf("Secrets as JSON = %s, %v; want no value", js, err)
	}
	if got := h.r.ConfigMaps(); len(got) != 1 || got[0].Name != "web" || got[0].Keys[0] != "mode" {
		t.Errorf("ConfigMaps = %+v, want default/web with key mode", got)
	}
}
