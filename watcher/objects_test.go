package watcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/manifests"
)

const readerPod = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: c\n    image: busybox\n" +
	"    volumeMounts: [{name: cfg, mountPath: /cfg}]\n  volumes:\n  - name: cfg\n    configMap: {name: web}\n"

func configMap(value string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {mode: " + value + "}\n"
}

func mode(t *testing.T, u manifests.Update) string {
	t.Helper()
	data, ok := u.Objects.Data(manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: "default", Name: "web"})
	if !ok {
		t.Fatalf("snapshot without ConfigMap default/web: %+v", u.Objects)
	}
	return string(data["mode"])
}

// TestWatcherSendsObjects follows a ConfigMap in one file that a pod in another reads:
// an edit of the ConfigMap alone is a new snapshot with the same pod, and its removal
// makes the pod's file fail with the reference located, keeping the pod and the last
// good ConfigMap.
func TestWatcherSendsObjects(t *testing.T) {
	dir := writeFiles(t, map[string]string{"web.yaml": readerPod, "config.yaml": configMap("fast")})
	updates := runWatcher(t, dir, time.Hour)
	first := awaitUpdate(t, updates, "start")
	if len(first.Pods) != 1 || len(first.Failures) > 0 || mode(t, first) != "fast" {
		t.Fatalf("first snapshot: %v, failures %v, mode %q", names(first), first.Failures, mode(t, first))
	}

	saveAtomically(t, filepath.Join(dir, "config.yaml"), configMap("slow"))
	edited := awaitUpdate(t, updates, "an edit of the ConfigMap")
	if len(edited.Pods) != 1 || edited.Pods[0].UID != first.Pods[0].UID || mode(t, edited) != "slow" {
		t.Fatalf("after the edit: pods %v (same UID: %v), mode %q; want the same pod and mode slow",
			names(edited), len(edited.Pods) == 1 && edited.Pods[0].UID == first.Pods[0].UID, mode(t, edited))
	}

	if err := os.Remove(filepath.Join(dir, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	gone := awaitUpdate(t, updates, "the ConfigMap's removal")
	if len(gone.Pods) != 1 || gone.Pods[0].UID != first.Pods[0].UID {
		t.Errorf("after the removal: pods %v, want the pod kept on its last good spec", names(gone))
	}
	if len(gone.Failures) != 1 || !strings.Contains(strings.Join(gone.Failures[0].Problems, "\n"), `web.yaml: spec.volumes[0].configMap.name: Not found: "web"`) {
		t.Errorf("after the removal: failures %+v, want web.yaml's missing reference", gone.Failures)
	}
	if _, ok := gone.Objects.Data(manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: "default", Name: "web"}); ok {
		t.Error("a removed file's ConfigMap is still in the snapshot")
	}
}

func TestScanObjectConflict(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.yaml": configMap("fast"), "b.yaml": configMap("slow"), "web.yaml": readerPod})
	snap, err := Scan([]string{dir}, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Conflicts) != 1 || !strings.Contains(snap.Conflicts[0].Error(), "b.yaml: ConfigMap default/web is already defined in "+filepath.Join(dir, "a.yaml")) {
		t.Errorf("conflicts = %v, want b.yaml's ConfigMap refused", snap.Conflicts)
	}
	if data, _ := snap.Objects().Data(manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: "default", Name: "web"}); string(data["mode"]) != "fast" {
		t.Errorf("ConfigMap from the first file has mode %q, want fast", data["mode"])
	}
}
