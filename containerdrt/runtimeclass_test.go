package containerdrt

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// loadSource loads a manifest as a source's snapshot does: its pod, checked and
// admitted against the manifest's own objects (manifests.Result.CheckReferences), and
// those objects.
func loadSource(t *testing.T, manifest string) (*corev1.Pod, manifests.Objects) {
	t.Helper()
	res := manifests.Load([]byte(manifest), manifests.Options{NodeName: "node1", Source: manifests.Source{Kind: manifests.SourceFile, Location: t.Name()}})
	objs := res.Objects()
	res.CheckReferences(objs)
	if len(res.Errors) > 0 || len(res.Pods) != 1 {
		t.Fatalf("manifest: %v", res.Errors)
	}
	return res.Pods[0], objs
}

// crunHandler is testenv.CrunHandler for a test.
func crunHandler(t *testing.T) string {
	t.Helper()
	h, err := testenv.CrunHandler(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// ociState is what an OCI runtime's `state` says of a container, or an error when the
// runtime does not know it: runc keeps state.json, crun a status file, under the
// same root (the runc shim's, /run/containerd/runc/<namespace>), and neither reads the
// other's.
func ociState(t *testing.T, runtime, ns, id string) (pid int, err error) {
	t.Helper()
	out, err := exec.Command(runtime, "--root", filepath.Join(shims.RuncRoot, ns), "state", id).Output()
	if err != nil {
		return 0, err
	}
	var st struct {
		Pid    int    `json:"pid"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("%s state %s: %v\n%s", runtime, id, err, out)
	}
	return st.Pid, nil
}

// A pod runs under the runtime handler its runtimeClassName names, directly or through
// a RuntimeClass document beside it: its containers, and the sandbox process of a pod
// that shares its PID namespace, are crun's (crun knows their state and pid, runc does
// not), and a pod that names none stays runc's.
func TestRuntimeClassRunsThePodUnderItsHandler(t *testing.T) {
	handler := crunHandler(t)
	r := newTestRuntime(t, func(cfg *Config) { cfg.RuntimeHandlers = []string{handler} })
	for _, tc := range []struct {
		name, manifest, want string
	}{
		{"named directly, with a sandbox process", `
apiVersion: v1
kind: Pod
metadata: {name: direct}
spec:
  runtimeClassName: crun
  shareProcessNamespace: true
  containers:
  - {name: c, image: ` + testImage + `, command: [sleep, "3600"]}
`, "crun"},
		{"through a RuntimeClass", `
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: light}
handler: crun
---
apiVersion: v1
kind: Pod
metadata: {name: through-class}
spec:
  runtimeClassName: light
  containers:
  - {name: c, image: ` + testImage + `, command: [sleep, "3600"]}
`, "crun"},
		{"none named", `
apiVersion: v1
kind: Pod
metadata: {name: default}
spec:
  containers:
  - {name: c, image: ` + testImage + `, command: [sleep, "3600"]}
`, "runc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, objs := loadSource(t, tc.manifest)
			cs := r.mustRunPodWith(t, pod, objs)
			ids := []string{r.awaitState(t, cs["c"].ID, runner.StateRunning).ID}
			if manifests.SharesPIDNamespace(pod) {
				ids = append(ids, sandboxID(pod, 0))
			}
			other := map[string]string{"crun": "runc", "runc": "crun"}[tc.want]
			for _, id := range ids {
				c, ok := r.find(t, id)
				if !ok || c.PID == 0 {
					t.Fatalf("%s: not running (%+v)", id, c)
				}
				pid, err := ociState(t, tc.want, r.cfg.Namespace, id)
				if err != nil || pid != int(c.PID) {
					t.Errorf("%s state %s = pid %d, %v; want pid %d", tc.want, id, pid, err, c.PID)
				}
				if _, err := ociState(t, other, r.cfg.Namespace, id); err == nil {
					t.Errorf("%s state %s: known to %s too", other, id, other)
				}
			}
		})
	}
}

// A pod whose runtime handler is unknown gets no sandbox: the error names
// spec.runtimeClassName, the class and the handler, and what there is.
func TestRuntimeClassUnknownFailsTheSandbox(t *testing.T) {
	r := newTestRuntime(t)
	for _, tc := range []struct {
		name, manifest, want string
	}{
		{"a handler named directly", `
apiVersion: v1
kind: Pod
metadata: {name: unknown}
spec:
  runtimeClassName: gvisor
  containers:
  - {name: c, image: ` + testImage + `}
`, `spec.runtimeClassName: no runtime for "gvisor" is configured: no RuntimeClass gvisor is defined beside the pod, and gvisor is not one of this node's runtime handlers (runc); ` +
			`add a RuntimeClass document, or the handler with --runtime-handler gvisor=<OCI runtime binary or containerd runtime type>`},
		{"through a RuntimeClass", `
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: secure}
handler: runsc
---
apiVersion: v1
kind: Pod
metadata: {name: unknown-class}
spec:
  runtimeClassName: secure
  containers:
  - {name: c, image: ` + testImage + `}
`, `spec.runtimeClassName: no runtime for "runsc" is configured: RuntimeClass secure names handler runsc, which is not one of this node's (runc); ` +
			`add it with --runtime-handler runsc=<OCI runtime binary or containerd runtime type>, or to containerd's CRI runtimes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, objs := loadSource(t, tc.manifest)
			_, err := r.startSandbox(pod, 0, objs)
			if err == nil || err.Error() != tc.want {
				t.Errorf("StartSandbox error =\n%v\nwant\n%s", err, tc.want)
			}
			list, lerr := r.List(r.ctx)
			if lerr != nil {
				t.Fatal(lerr)
			}
			for _, c := range list {
				if c.PodUID == pod.UID {
					t.Errorf("left behind: %+v", c)
				}
			}
		})
	}
}

// The overhead of a pod's RuntimeClass is added to its cgroup's limits and CPU shares,
// as the kubelet's ResourceConfigForPod adds spec.overhead.
func TestRuntimeClassOverheadSizesThePodCgroup(t *testing.T) {
	r := newTestRuntime(t)
	pod, objs := loadSource(t, `
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: weighed}
handler: runc
overhead:
  podFixed: {memory: 16Mi, cpu: 50m}
---
apiVersion: v1
kind: Pod
metadata: {name: overhead}
spec:
  runtimeClassName: weighed
  containers:
  - name: c
    image: `+testImage+`
    command: ["sleep", "3600"]
    resources:
      limits: {memory: 32Mi, cpu: 100m}
`)
	cs := r.mustRunPodWith(t, pod, objs)
	r.awaitState(t, cs["c"].ID, runner.StateRunning)
	_, root := r.Cgroups()
	dir := filepath.Join(root, "pod"+string(pod.UID))
	want := map[string]string{ // 32Mi + 16Mi; 100m + 50m
		filepath.Join(cgroups.MountPoint, dir, "memory.max"): "50331648",
		filepath.Join(cgroups.MountPoint, dir, "cpu.max"):    "15000 100000",
	}
	if !spec.HostCgroups().Unified {
		want = map[string]string{
			filepath.Join(cgroups.MountPoint, "memory", dir, "memory.limit_in_bytes"): "50331648",
			filepath.Join(cgroups.MountPoint, "cpu", dir, "cpu.cfs_quota_us"):         "15000",
			filepath.Join(cgroups.MountPoint, "cpu", dir, "cpu.shares"):               "153",
		}
	}
	for file, v := range want {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != v {
			t.Errorf("%s = %s, want %s", file, got, v)
		}
	}
}
