package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// markingPod is a manifest of the pod name, of UID uid, that appends mark to the file
// marks of its emptyDir data when it starts, then sleeps.
func markingPod(uid, name, mark string) string {
	m := podManifest(name, "Always", "echo "+mark+" >> /data/marks; sleep 3600", "  volumes: [{name: data, emptyDir: {}}]\n")
	return withUID(strings.Replace(m, "    command:", "    volumeMounts: [{name: data, mountPath: /data}]\n    command:", 1), uid)
}

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
	pod := func(name, mark string) string { return markingPod(uid, name, mark) }
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

// A pushed manifest that copies a running file pod's UID and name never takes the pod
// over when staticpod restarts, although the push store is read before the manifest
// directory: neither one stored while staticpod was stopped, nor one pushed right after
// it started. The file pod runs on untouched (same container, same PID, no restart,
// its emptyDir holding only its own line); the stored one is refused naming the file,
// and the push is refused too: 503 while staticpod cannot tell yet, else 422 naming the
// file.
func TestPushCopyingARunningFilePodIsRefusedAfterARestart(t *testing.T) {
	const uid = "5c0ffee0-8a3c-4f57-9d7e-2b8e0c1d9a11"
	n := newNode(t)
	sp := n.start()
	original := filepath.Join(n.manifests, "etcd.yaml")
	n.write("etcd.yaml", markingPod(uid, "etcd", "first"))
	first := n.await("the file pod running", time.Minute, running("etcd-node1/main/0"))["etcd-node1/main/0"]
	marks := n.path("root/pods/" + uid + "/volumes/data/marks")
	awaitFile(t, marks, "first")
	untouched := func(when string) {
		t.Helper()
		n.awaitRelists(5) // each would have woken a worker of the pushed spec
		cs := n.containers()
		if now := cs["etcd-node1/main/0"]; now.ID != first.ID || now.PID != first.PID || now.State != runner.StateRunning {
			t.Errorf("%s: the file pod's container is %+v, want %s (PID %d) running untouched", when, now, first.ID, first.PID)
		}
		if len(cs) != 1 {
			t.Errorf("%s: containers %v, want the file pod's alone (no restart, no pushed pod)", when, summary(cs))
		}
		if got, _ := os.ReadFile(marks); string(got) != "first\n" {
			t.Errorf("%s: the file pod's emptyDir holds %q, want only its own line", when, got)
		}
		if p := n.pods()["etcd-node1"]; p.Annotations[manifests.AnnotationLocation] != original || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("%s: /pods shows etcd-node1 from %q with status %+v; want the file pod, never restarted", when, p.Annotations[manifests.AnnotationLocation], p.Status)
		}
	}

	sp.stop() // the pods run on
	// A push stored as Put stores it: <root>/manifests/<name>.yaml, the manifest as sent.
	if err := os.WriteFile(n.path("root/manifests/stored.yaml"), []byte(markingPod(uid, "etcd", "stored")), 0o600); err != nil {
		t.Fatal(err)
	}
	sp = n.start()
	n.awaitEvent("PodConflict", `stored: metadata.uid: Duplicate value: "`+uid+`": already the UID of pod default/etcd-node1 from file `+original)
	sp.awaitLog("ignored=stored")
	untouched("a copy in the push store")

	if code, body := n.deleteManifest("stored"); code != http.StatusOK {
		t.Fatalf("DELETE /manifests/stored: %d %s", code, body)
	}
	sp.stop()
	n.start()
	code, body := n.putEarly("early", markingPod(uid, "etcd", "early"))
	if !(code == http.StatusServiceUnavailable && strings.Contains(body, "staticpod is starting")) &&
		!(code == http.StatusUnprocessableEntity && strings.Contains(body, `"field":"metadata.uid"`) && strings.Contains(body, original)) {
		t.Errorf("push right after the restart: %d %s; want 503 (starting) or 422 at metadata.uid naming %s", code, body, original)
	}
	testenv.Await(t, "a push no longer answered 503", 30*time.Second, func() bool { // as a client retries
		code, body = n.putEarly("later", markingPod(uid, "etcd", "later"))
		return code != http.StatusServiceUnavailable
	})
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, `"field":"metadata.uid"`) || !strings.Contains(body, original) {
		t.Errorf("push once staticpod could tell: %d %s; want 422 at metadata.uid naming %s", code, body, original)
	}
	untouched("pushes right after a restart")
}

// deleteManifest deletes a pushed manifest and returns status and body.
func (n *node) deleteManifest(name string) (int, string) {
	n.t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, "http://staticpod/manifests/"+name, nil)
	resp, err := socketClient(n.path("staticpod.sock")).Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// putEarly pushes a manifest as soon as the daemon's socket answers, without waiting
// for it to be ready, and returns status and body.
func (n *node) putEarly(name, body string) (int, string) {
	n.t.Helper()
	var resp *http.Response
	testenv.Await(n.t, "the API socket to answer", 30*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodPut, "http://staticpod/manifests/"+name, strings.NewReader(body))
		var err error
		resp, err = socketClient(n.path("staticpod.sock")).Do(req)
		return err == nil
	})
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Once a file pod's manifest is removed, a push may have its UID (the kubelet's answer:
// UIDs are unique, the pod is gone), but only once the file pod is: the push is refused
// while the file pod's containers run, and the pushed pod then starts afresh, in an
// emptyDir that holds nothing of the file pod's.
func TestUIDOfARemovedPodGoesToAPushOnlyOnceThePodAndItsDataAreGone(t *testing.T) {
	const uid = "0dd0dd00-8a3c-4f57-9d7e-2b8e0c1d9a11"
	n := newNode(t)
	n.start()
	n.write("etcd.yaml", markingPod(uid, "etcd", "first"))
	first := n.await("the file pod running", time.Minute, running("etcd-node1/main/0"))["etcd-node1/main/0"]
	marks := n.path("root/pods/" + uid + "/volumes/data/marks")
	awaitFile(t, marks, "first")

	if err := os.Remove(filepath.Join(n.manifests, "etcd.yaml")); err != nil {
		t.Fatal(err)
	}
	var code int
	var body string
	refused := 0
	testenv.Await(t, "the push taking the removed pod's UID to be stored", time.Minute, func() bool {
		code, body = n.putManifest("etcd", markingPod(uid, "etcd", "pushed"))
		if code == http.StatusUnprocessableEntity && strings.Contains(body, `"field":"metadata.uid"`) {
			refused++
			return false
		}
		return true
	})
	if code != http.StatusOK {
		t.Fatalf("push: %d %s; want 200 once the file pod is gone", code, body)
	}
	if c, ok := n.containers()["etcd-node1/main/0"]; ok && c.PID == first.PID && c.State == runner.StateRunning {
		t.Errorf("the push was stored while the file pod's container still ran (refused %d times before)", refused)
	}
	cs := n.await("the pushed pod running", time.Minute, func(cs map[string]runner.Container) bool {
		c := cs["etcd-node1/main/0"] // its ID is the file pod's: same name, UID and attempt
		return c.State == runner.StateRunning && c.PID != first.PID
	})
	awaitFile(t, marks, "pushed")
	if got, _ := os.ReadFile(marks); string(got) != "pushed\n" {
		t.Errorf("the pushed pod's emptyDir holds %q; want its own line alone, nothing of the file pod's", got)
	}
	if len(cs) != 1 {
		t.Errorf("containers %v; want the pushed pod's alone", summary(cs))
	}
}
