package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// appObjects are a ConfigMap and a Secret for appPod, in one file with it.
func appObjects(conf, greeting string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  greeting: %s
  app.conf: %s
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
stringData:
  password: s3cret-value
---
`, greeting, conf)
}

// appPod mounts the ConfigMap and the Secret and reads a key of the ConfigMap through
// its environment.
const appPod = `apiVersion: v1
kind: Pod
metadata:
  name: app
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + e2eImage + `
    command: ["sh", "-c", "echo greeting=$GREETING; trap 'exit 0' TERM; while true; do sleep 0.1; done"]
    env:
    - name: GREETING
      valueFrom:
        configMapKeyRef: {name: app-config, key: greeting}
    volumeMounts:
    - {name: config, mountPath: /etc/app}
    - {name: secret, mountPath: /etc/secret}
  volumes:
  - name: config
    configMap: {name: app-config}
  - name: secret
    secret: {secretName: app-secret, defaultMode: 0400}
`

// syncPeriod is how soon a change of a manifest must reach a running pod: fsnotify
// tells the file source at once, and the pod's worker syncs at the next relist (every
// e2eRelist); a change seen only by the periodic rescan (20 s) would miss it.
const syncPeriod = 10 * time.Second

// TestObjectsReachThePod proves the ConfigMaps and Secrets of a manifest file end to
// end: a pod reads them as files and through its environment; an edit of the ConfigMap
// reaches the mounted file in place, in the same process, with the kubelet's ..data
// swap, while the environment keeps its value; the Secret's files are on a tmpfs; a
// restart of staticpod adopts the pod and brings its volumes up to date; the API lists
// names and keys, never values; and the tmpfs goes with the pod.
func TestObjectsReachThePod(t *testing.T) {
	n := newNode(t)
	sp := n.start()
	n.write("app.yaml", appObjects("v1", "hello")+appPod)
	first := n.await("app running", time.Minute, running("app-node1/main/0"))["app-node1/main/0"]
	awaitFile(t, first.LogPath, "stdout F greeting=hello")
	n.awaitContent("app-node1", "/etc/app/app.conf", "v1", time.Minute)
	if out, code := n.execIn("app-node1", "cat", "/etc/secret/password"); code != 0 || out != "s3cret-value" {
		t.Errorf("/etc/secret/password = %q (exit %d), want the Secret's value", out, code)
	}
	if out, _ := n.execIn("app-node1", "stat", "-L", "-c", "%a", "/etc/secret/password"); strings.TrimSpace(out) != "400" {
		t.Errorf("/etc/secret/password has mode %q, want defaultMode 400", out)
	}

	// The Secret's files are on a tmpfs, as the container and the host see them.
	mounts, _ := n.execIn("app-node1", "cat", "/proc/mounts")
	if fs := mountType(mounts, "/etc/secret"); fs != "tmpfs" {
		t.Errorf("/etc/secret is on %q in the container, want tmpfs:\n%s", fs, mounts)
	}
	secretDir := filepath.Join(n.path("root"), "pods", string(first.PodUID), "volumes", "secret")
	hostMounts, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	if fs := mountType(string(hostMounts), secretDir); fs != "tmpfs" {
		t.Errorf("%s is on %q on the host, want tmpfs", secretDir, fs)
	}

	// An edit of the ConfigMap alone updates the file in place, in the same process.
	edited := time.Now()
	n.write("app.yaml", appObjects("v2", "bye")+appPod)
	n.awaitContent("app-node1", "/etc/app/app.conf", "v2", syncPeriod)
	t.Logf("the edit reached the mounted file in %v", time.Since(edited).Round(time.Millisecond))
	now := n.containers()["app-node1/main/0"]
	if now.ID != first.ID || now.PID != first.PID || now.State != runner.StateRunning {
		t.Errorf("the edit touched the container: %+v, was %+v", now, first)
	}
	if out, _ := n.execIn("app-node1", "readlink", "/etc/app/..data"); !strings.HasPrefix(out, "..20") {
		t.Errorf("/etc/app/..data -> %q, want a timestamped dir", out)
	}
	if out, _ := n.execIn("app-node1", "readlink", "/etc/app/app.conf"); out != "..data/app.conf\n" {
		t.Errorf("/etc/app/app.conf -> %q, want ..data/app.conf", out)
	}
	if env, _ := n.execIn("app-node1", "sh", "-c", "tr '\\0' '\\n' < /proc/1/environ | grep GREETING"); strings.TrimSpace(env) != "GREETING=hello" {
		t.Errorf("the container's environment after the edit: %q, want GREETING=hello until it restarts", env)
	}

	// The API shows what is loaded, names and keys only.
	code, body := n.apiGet("/secrets")
	var secrets []runner.Object
	if code != http.StatusOK || json.Unmarshal(body, &secrets) != nil || len(secrets) != 1 || secrets[0].Name != "app-secret" || secrets[0].Keys[0] != "password" {
		t.Errorf("GET /secrets = %d %s, want app-secret with key password", code, body)
	}
	if strings.Contains(string(body), "s3cret") {
		t.Errorf("GET /secrets shows a value: %s", body)
	}
	if code, body := n.apiGet("/configmaps"); code != http.StatusOK || !strings.Contains(string(body), `"keys":["app.conf","greeting"]`) {
		t.Errorf("GET /configmaps = %d %s, want app-config with its keys", code, body)
	}

	// A restart of staticpod adopts the pod and brings its volumes up to date.
	sp.kill9()
	n.write("app.yaml", appObjects("v3", "bye")+appPod)
	sp = n.start()
	n.awaitContent("app-node1", "/etc/app/app.conf", "v3", time.Minute)
	if now := n.containers()["app-node1/main/0"]; now.PID != first.PID || now.State != runner.StateRunning {
		t.Errorf("after a restart of staticpod: %+v, want the container adopted (pid %d)", now, first.PID)
	}

	// The pod goes, and its tmpfs with it.
	if err := os.Remove(filepath.Join(n.manifests, "app.yaml")); err != nil {
		t.Fatal(err)
	}
	n.await("app removed", time.Minute, func(cs map[string]runner.Container) bool { return len(cs) == 0 })
	testenv.Await(t, "the Secret's tmpfs unmounted", 30*time.Second, func() bool {
		data, _ := os.ReadFile("/proc/mounts")
		return !strings.Contains(string(data), string(first.PodUID))
	})
	sp.awaitLog("pod removed")
}

// TestObjectsMissing: a reference to a key no document has is refused with its field
// path before the pod runs; an object that goes while the pod runs leaves the pod
// running, and its next start waits with CreateContainerConfigError.
func TestObjectsMissing(t *testing.T) {
	n := newNode(t)
	sp := n.start()
	n.write("bad.yaml", appObjects("v1", "hello")+strings.Replace(appPod, "key: greeting", "key: greting", 1))
	sp.awaitLog(`bad.yaml (document 3): spec.containers[0].env[0].valueFrom.configMapKeyRef.key: Not found: \"greting\"`)
	if err := os.Remove(filepath.Join(n.manifests, "bad.yaml")); err != nil {
		t.Fatal(err)
	}

	n.write("config.yaml", appObjects("v1", "hello"))
	n.write("app.yaml", appPod)
	first := n.await("app running", time.Minute, running("app-node1/main/0"))["app-node1/main/0"]
	if err := os.Remove(filepath.Join(n.manifests, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	sp.awaitLog(`app.yaml: spec.volumes[1].secret.secretName: Not found: \"app-secret\"`)
	n.awaitRelists(3)
	if now := n.containers()["app-node1/main/0"]; now.PID != first.PID || now.State != runner.StateRunning {
		t.Fatalf("the pod after its objects went: %+v; it must run on", now)
	}
	if err := syscall.Kill(int(first.PID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var st corev1.ContainerStatus
	testenv.Await(t, "app waiting with CreateContainerConfigError", time.Minute, func() bool {
		p := n.pods()["app-node1"]
		if len(p.Status.ContainerStatuses) == 1 {
			st = p.Status.ContainerStatuses[0]
		}
		return st.State.Waiting != nil && st.State.Waiting.Reason == "CreateContainerConfigError"
	})
	if msg := st.State.Waiting.Message; !strings.Contains(msg, `not found`) {
		t.Errorf("waiting message %q does not say what is missing", msg)
	}

	// The objects come back: the pod starts again.
	n.write("config.yaml", appObjects("v1", "hello"))
	n.await("app running again", time.Minute, running("app-node1/main/1"))
}

// awaitContent waits until a file in the pod's container holds want.
func (n *node) awaitContent(pod, path, want string, timeout time.Duration) {
	n.t.Helper()
	var out string
	defer func() {
		if out != want {
			n.t.Logf("%s in %s: %q", path, pod, out)
		}
	}()
	testenv.Await(n.t, fmt.Sprintf("%s in %s to hold %q", path, pod, want), timeout, func() bool {
		out, _ = n.execIn(pod, "cat", path)
		return out == want
	})
}

// mountType is the filesystem type /proc/mounts gives the mount at dir, "" for none.
func mountType(procMounts, dir string) string {
	fs := ""
	for line := range strings.Lines(procMounts) {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == dir {
			fs = f[2] // the last mount at dir is the one seen
		}
	}
	return fs
}
