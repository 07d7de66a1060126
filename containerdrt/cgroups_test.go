package containerdrt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/runner"
)

// A container runs in its pod's cgroup under the QoS class's, below the runtime's
// root (/<namespace> with cgroupfs), and the pod's cgroup goes with the pod.
func TestPodCgroupOnTheHost(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: placed}
spec:
  containers:
  - name: c
    image: `+testImage+`
    command: ["sleep", "3600"]
    resources:
      requests: {memory: 16Mi}
`)
	driver, root := r.Cgroups()
	if driver != cgroups.Cgroupfs || root != "/"+r.cfg.Namespace {
		t.Fatalf("Cgroups() = %s %s, want cgroupfs /%s on a host without systemd", driver, root, r.cfg.Namespace)
	}
	cs := r.mustRunPod(t, pod)
	c := r.awaitState(t, cs["c"].ID, runner.StateRunning)
	podDir := path.Join(root, "burstable", "pod"+string(pod.UID))
	want := path.Join(podDir, c.ID)
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.PID))
	if err != nil {
		t.Fatal(err)
	}
	// cgroup v2: "0::<path>"; v1: one line per hierarchy, "<n>:memory:<path>" among them.
	found := false
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) == 3 && (parts[1] == "" || parts[1] == "memory") && parts[2] == want {
			found = true
		}
	}
	if !found {
		t.Fatalf("container's /proc/%d/cgroup:\n%s\nwant the memory (or unified) cgroup %s", c.PID, data, want)
	}
	memDir := filepath.Join(cgroups.MountPoint, podDir)
	if !spec.HostCgroups().Unified {
		memDir = filepath.Join(cgroups.MountPoint, "memory", podDir)
	}
	if _, err := os.Stat(memDir); err != nil {
		t.Fatalf("pod cgroup: %v", err)
	}
	r.mustRemove(t, c.ID)
	if err := r.RemovePodData(r.ctx, pod.UID); err != nil {
		t.Fatalf("RemovePodData: %v", err)
	}
	if _, err := os.Stat(memDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pod cgroup %s after RemovePodData: %v, want it gone", memDir, err)
	}
}

// A Guaranteed pod's cgroup, right under the root, is capped at the sum of its
// containers' limits.
func TestPodCgroupLimitsOnTheHost(t *testing.T) {
	r := newTestRuntime(t, func(cfg *Config) { cfg.Cgroups.PodMaxPIDs = 64 })
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: capped}
spec:
  containers:
  - name: a
    image: `+testImage+`
    command: ["sleep", "3600"]
    resources:
      limits: {memory: 32Mi, cpu: 100m}
  - name: b
    image: `+testImage+`
    command: ["sleep", "3600"]
    resources:
      limits: {memory: 16Mi, cpu: 100m}
`)
	cs := r.mustRunPod(t, pod)
	r.awaitState(t, cs["b"].ID, runner.StateRunning)
	_, root := r.Cgroups()
	dir := path.Join(root, "pod"+string(pod.UID))
	read := func(file string) string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	want := map[string]string{
		filepath.Join(cgroups.MountPoint, dir, "memory.max"): "50331648",
		filepath.Join(cgroups.MountPoint, dir, "cpu.max"):    "20000 100000",
		filepath.Join(cgroups.MountPoint, dir, "pids.max"):   "64",
	}
	if !spec.HostCgroups().Unified {
		want = map[string]string{
			filepath.Join(cgroups.MountPoint, "memory", dir, "memory.limit_in_bytes"): "50331648",
			filepath.Join(cgroups.MountPoint, "cpu", dir, "cpu.cfs_quota_us"):         "20000",
			filepath.Join(cgroups.MountPoint, "cpu", dir, "cpu.shares"):               "204",
			filepath.Join(cgroups.MountPoint, "pids", dir, "pids.max"):                "64",
		}
	}
	for file, v := range want {
		if got := read(file); got != v {
			t.Errorf("%s = %s, want %s", file, got, v)
		}
	}
}

// Pod-level resources (spec.resources) size the pod's cgroup, as the kubelet's
// ResourceConfigForPod does: its memory and CPU limits are the pod's, not the sum of
// its containers', and its CPU shares come from the pod's CPU request. A container
// without a limit of its own is held to the pod's, in its cgroup and through the
// downward API.
func TestPodCgroupLimitsFromPodResources(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: pod-level}
spec:
  resources:
    requests: {cpu: 250m}
    limits: {memory: 64Mi, cpu: 500m}
  containers:
  - name: a
    image: `+testImage+`
    command: ["sleep", "3600"]
    resources:
      limits: {memory: 16Mi, cpu: 100m}
  - name: b
    image: `+testImage+`
    command: ["sleep", "3600"]
    env:
    - name: MEMORY
      valueFrom: {resourceFieldRef: {resource: limits.memory}}
    - name: MILLICPU
      valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}
`)
	cs := r.mustRunPod(t, pod)
	r.awaitState(t, cs["b"].ID, runner.StateRunning)
	_, root := r.Cgroups()
	dir := path.Join(root, "burstable", "pod"+string(pod.UID)) // pod-level requests below limits
	unified := spec.HostCgroups().Unified
	want := map[string]string{
		filepath.Join(cgroups.MountPoint, dir, "memory.max"): "67108864",
		filepath.Join(cgroups.MountPoint, dir, "cpu.max"):    "50000 100000",
		filepath.Join(cgroups.MountPoint, dir, "cpu.weight"): "10",
	}
	if !unified {
		want = map[string]string{
			filepath.Join(cgroups.MountPoint, "memory", dir, "memory.limit_in_bytes"): "67108864",
			filepath.Join(cgroups.MountPoint, "cpu", dir, "cpu.cfs_quota_us"):         "50000",
			filepath.Join(cgroups.MountPoint, "cpu", dir, "cpu.shares"):               "256",
		}
	}
	for file, v := range want {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != v {
			t.Errorf("pod cgroup: %s = %s, want %s", file, got, v)
		}
	}

	own := specKeyValues(r.execOut(t, cs["b"].ID, "sh", "-c", specCgroupScript))
	wantOwn := map[string]string{"memory/memory.limit_in_bytes": "67108864", "cpu/cpu.cfs_quota_us": "50000"}
	if unified {
		wantOwn = map[string]string{"memory.max": "67108864", "cpu.max": "50000 100000"}
	}
	for k, v := range wantOwn {
		if own[k] != v {
			t.Errorf("container b's cgroup: %s = %q, want %q (the pod's limit); all: %v", k, own[k], v, own)
		}
	}
	if got := strings.Fields(r.execOut(t, cs["b"].ID, "sh", "-c", "echo $MEMORY $MILLICPU")); !slices.Equal(got, []string{"67108864", "500"}) {
		t.Errorf("container b's downward API limits.memory, limits.cpu = %v, want the pod's [67108864 500]", got)
	}
}
