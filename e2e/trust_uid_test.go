package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/runner"
)

// withUID gives a manifest of podManifest the metadata.uid uid.
func withUID(manifest, uid string) string {
	return strings.Replace(manifest, "metadata:\n", "metadata:\n  uid: "+strconv.Quote(uid)+"\n", 1)
}

// podsOf lists the containers of the pod named pod (with its node suffix).
func podsOf(cs map[string]runner.Container, pod string) []string {
	var out []string
	for key := range cs {
		if strings.HasPrefix(key, pod+"/") {
			out = append(out, key)
		}
	}
	return out
}

// A manifest whose metadata.uid is a path climbing out of the pods directory, or a
// glob, is refused (validate, the log, an event, a push) and runs nothing: the
// directory it points at gets no /etc files and loses nothing, and removing the
// manifest removes no other pod's logs.
func TestUIDThatIsAPathOrAGlobIsRefused(t *testing.T) {
	n := newNode(t)
	victim := n.path("victim")
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	escape := "aaaaaaaa/" + strings.Repeat("../", 30) + strings.TrimPrefix(victim, "/")
	sp := n.start()
	n.write("other.yaml", podManifest("other", "Always", "echo other; sleep 3600"))
	other := n.await("the other pod running", time.Minute, running("other-node1/main/0"))["other-node1/main/0"]
	awaitFile(t, other.LogPath, "stdout F other")

	n.write("escape.yaml", withUID(podManifest("escape", "Always", "echo escaped > /etc/hostname; sleep 3600"), escape))
	n.write("everyone.yaml", withUID(podManifest("everyone", "Always", "sleep 3600"), "*"))

	out, code := runStaticpod(t, "validate", "--hostname-override", e2eNode, n.manifests)
	for _, file := range []string{"escape.yaml", "everyone.yaml"} {
		want := "error: " + filepath.Join(n.manifests, file) + ": metadata.uid: Invalid value"
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("validate: exit %d, want 1 and %q:\n%s", code, want, out)
		}
	}
	sp.awaitLog(filepath.Join(n.manifests, "escape.yaml") + ": metadata.uid: Invalid value")
	sp.awaitLog(filepath.Join(n.manifests, "everyone.yaml") + `: metadata.uid: Invalid value: \"*\"`)
	n.awaitEvent("InvalidManifest", "escape.yaml: metadata.uid")
	if code, body := n.putManifest("everyone", withUID(podManifest("everyone", "Always", "sleep 3600"), "*")); code != http.StatusUnprocessableEntity || !strings.Contains(body, `"field":"metadata.uid"`) {
		t.Errorf("push of a pod with uid *: %d %s; want 422 at metadata.uid", code, body)
	}
	n.awaitRelists(5) // each would have woken a worker of a refused pod

	cs := n.containers()
	if bad := append(podsOf(cs, "escape-node1"), podsOf(cs, "everyone-node1")...); len(bad) > 0 {
		t.Errorf("refused pods run: %v", bad)
	}
	if now := cs["other-node1/main/0"]; now.ID != other.ID || now.State != runner.StateRunning {
		t.Errorf("the other pod was disturbed: %+v", now)
	}

	// Removing the refused manifests removes nothing: no pod of theirs ran.
	for _, file := range []string{"escape.yaml", "everyone.yaml"} {
		if err := os.Remove(filepath.Join(n.manifests, file)); err != nil {
			t.Fatal(err)
		}
	}
	// A pod written after the removal runs once the directory was read without them.
	n.write("after.yaml", podManifest("after", "Always", "sleep 3600"))
	n.await("the removal seen, and any pod of the removed files gone", time.Minute, func(cs map[string]runner.Container) bool {
		return running("after-node1/main/0")(cs) && len(podsOf(cs, "escape-node1"))+len(podsOf(cs, "everyone-node1")) == 0
	})
	n.awaitRelists(5) // a removed pod's data goes right after its last container
	entries, err := os.ReadDir(victim)
	if err != nil || len(entries) != 1 || entries[0].Name() != "keep" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the directory the uid pointed at holds %v (%v); want only its own file", names, err)
	}
	if _, err := os.Stat(other.LogPath); err != nil {
		t.Errorf("the other pod's log is gone: %v", err)
	}
}

// Two manifests with one metadata.uid (a manifest copied from `kubectl get -o yaml`, a
// push copying a file pod's UID): the pod that runs keeps running untouched (same
// container, no restart, its emptyDir data intact) and the other is refused, with
// both files named in the log, an event and validate; a push is refused with 422
// naming the file pod.
func TestSecondPodOfAUIDIsRefused(t *testing.T) {
	const uid = "3f5b3a0e-8a3c-4f57-9d7e-2b8e0c1d9a11"
	n := newNode(t)
	sp := n.start()
	data := "  volumes: [{name: data, emptyDir: {}}]\n"
	pod := func(name, mark string) string {
		m := podManifest(name, "Always", "echo "+mark+" >> /data/marks; sleep 3600", data)
		return withUID(strings.Replace(m, "    command:", "    volumeMounts: [{name: data, mountPath: /data}]\n    command:", 1), uid)
	}
	n.write("etcd.yaml", pod("etcd", "first"))
	first := n.await("the first pod running", time.Minute, running("etcd-node1/main/0"))["etcd-node1/main/0"]
	marks := n.path("root/pods/" + uid + "/volumes/data/marks")
	awaitFile(t, marks, "first")

	// etcd-copy.yaml sorts before etcd.yaml: order alone would pick the copy.
	original, copied := filepath.Join(n.manifests, "etcd.yaml"), filepath.Join(n.manifests, "etcd-copy.yaml")
	n.write("etcd-copy.yaml", pod("etcd2", "copy"))
	sp.awaitLog(`field=metadata.uid`)
	sp.awaitLog("ignored=" + copied)
	n.awaitEvent("PodConflict", copied+": metadata.uid: Duplicate value: \""+uid+"\": already the UID of pod default/etcd-node1 from file "+original)
	code, body := n.putManifest("reuse", pod("pushed", "pushed"))
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, `"field":"metadata.uid"`) || !strings.Contains(body, original) {
		t.Errorf("push reusing the file pod's uid: %d %s; want 422 at metadata.uid naming %s", code, body, original)
	}
	out, vcode := runStaticpod(t, "validate", "--hostname-override", e2eNode, n.manifests)
	if vcode != 1 || !strings.Contains(out, ": metadata.uid: Duplicate value") || !strings.Contains(out, original) || !strings.Contains(out, copied) {
		t.Errorf("validate of two files of one uid: exit %d, want 1 and an error at metadata.uid naming both files:\n%s", vcode, out)
	}
	n.awaitRelists(5) // each would have woken the worker of a pod replaced

	cs := n.containers()
	if now := cs["etcd-node1/main/0"]; now.ID != first.ID || now.PID != first.PID || now.State != runner.StateRunning {
		t.Errorf("the first pod's container is %+v, want %s running untouched", now, first.ID)
	}
	if len(cs) != 1 {
		t.Errorf("containers %v, want the first pod's alone (no restart, no copy)", summary(cs))
	}
	if got, _ := os.ReadFile(marks); string(got) != "first\n" {
		t.Errorf("the first pod's emptyDir holds %q, want only its own line", got)
	}
}
