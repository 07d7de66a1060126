package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/runner"
)

// qosPod is a pod of the QoS class whose requests and limits are given.
func qosPod(uid types.UID, requests, limits corev1.ResourceList) *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
	}}}}
	pod.UID = uid
	return pod
}

func TestPodCgroupsLayout(t *testing.T) {
	mem := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi"), corev1.ResourceCPU: resource.MustParse("100m")}
	pods := map[string]*corev1.Pod{
		"guaranteed": qosPod("0123-abcd", mem, mem),
		"burstable":  qosPod("0123-abcd", corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}, nil),
		"besteffort": qosPod("0123-abcd", nil, nil),
	}
	for _, tc := range []struct {
		cfg       CgroupConfig
		pod, want string
		dir       string // where the container's cgroup is in the cgroup filesystem
	}{
		{CgroupConfig{Driver: CgroupDriverCgroupfs}, "guaranteed", "/staticpod/pod0123-abcd/web_c_0_0123abcd", "/staticpod/pod0123-abcd/web_c_0_0123abcd"},
		{CgroupConfig{Driver: CgroupDriverCgroupfs, Root: "/k8s/static/"}, "burstable", "/k8s/static/burstable/pod0123-abcd/web_c_0_0123abcd", "/k8s/static/burstable/pod0123-abcd/web_c_0_0123abcd"},
		{CgroupConfig{}, "besteffort", "/staticpod/besteffort/pod0123-abcd/web_c_0_0123abcd", "/staticpod/besteffort/pod0123-abcd/web_c_0_0123abcd"},
		{CgroupConfig{Driver: CgroupDriverSystemd}, "guaranteed",
			"staticpod-pod0123_abcd.slice:staticpod:web_c_0_0123abcd",
			"/staticpod.slice/staticpod-pod0123_abcd.slice/staticpod-web_c_0_0123abcd.scope"},
		{CgroupConfig{Driver: CgroupDriverSystemd}, "burstable",
			"staticpod-burstable-pod0123_abcd.slice:staticpod:web_c_0_0123abcd",
			"/staticpod.slice/staticpod-burstable.slice/staticpod-burstable-pod0123_abcd.slice/staticpod-web_c_0_0123abcd.scope"},
		{CgroupConfig{Driver: CgroupDriverSystemd, Root: "system-static.slice"}, "besteffort",
			"system-static-besteffort-pod0123_abcd.slice:staticpod:web_c_0_0123abcd",
			"/system.slice/system-static.slice/system-static-besteffort.slice/system-static-besteffort-pod0123_abcd.slice/staticpod-web_c_0_0123abcd.scope"},
	} {
		c, err := newPodCgroups(tc.cfg)
		if err != nil {
			t.Fatalf("newPodCgroups(%+v): %v", tc.cfg, err)
		}
		got := c.container(pods[tc.pod], "web_c_0_0123abcd")
		if got != tc.want {
			t.Errorf("%+v: container(%s pod) = %q, want %q", tc.cfg, tc.pod, got, tc.want)
		}
		if dir := cgroupDir(got); dir != tc.dir {
			t.Errorf("cgroupDir(%q) = %q, want %q", got, dir, tc.dir)
		}
	}
}

// A UID that is not a plain token never names a cgroup outside the QoS class's: the
// runtime refuses such pods before, and the name stays one entry all the same.
func TestPodCgroupOfAForgedUIDStaysInside(t *testing.T) {
	for _, driver := range []CgroupDriver{CgroupDriverCgroupfs, CgroupDriverSystemd} {
		c, err := newPodCgroups(CgroupConfig{Driver: driver})
		if err != nil {
			t.Fatal(err)
		}
		for _, uid := range []types.UID{"a/../../../../tmp/x", "*", "", ".."} {
			got := c.podIn("burstable", uid)
			dir := cgroupDir(got + ":staticpod:id")
			if driver == CgroupDriverCgroupfs {
				dir = got
			}
			if strings.Contains(got, "/..") || strings.Contains(got, "*") || !strings.HasPrefix(path.Clean(dir), "/staticpod") {
				t.Errorf("%s: podIn(burstable, %q) = %q (%s), outside /staticpod", driver, uid, got, dir)
			}
			if err := (&Runtime{cgroup: c}).removePodCgroup(t.Context(), uid); err == nil {
				t.Errorf("%s: removePodCgroup(%q) = nil, want an error", driver, uid)
			}
		}
	}
}

func TestPodCgroupsRefusesAMismatchedRoot(t *testing.T) {
	for _, cfg := range []CgroupConfig{
		{Driver: CgroupDriverCgroupfs, Root: "staticpod"},
		{Driver: CgroupDriverCgroupfs, Root: "/staticpod.slice"},
		{Driver: CgroupDriverSystemd, Root: "/staticpod"},
		{Driver: CgroupDriverSystemd, Root: "-.slice"},
		{Driver: CgroupDriverSystemd, Root: "a--b.slice"},
		{Driver: "lxc"},
	} {
		if _, err := newPodCgroups(cfg); err == nil {
			t.Errorf("newPodCgroups(%+v) = nil error, want one", cfg)
		}
	}
}

func TestCgroupDirOfTheDefaultSpec(t *testing.T) {
	// Containers made before pod cgroups carry containerd's default /<namespace>/<id>.
	if got := cgroupDir("/staticpod/web_c_0_x"); got != "/staticpod/web_c_0_x" {
		t.Errorf("cgroupDir = %q", got)
	}
	if got := cgroupDir("system.slice:docker:abc"); got != "/system.slice/docker-abc.scope" {
		t.Errorf("cgroupDir = %q", got)
	}
}

func TestCgroupOptsSystemd(t *testing.T) {
	c, _ := newPodCgroups(CgroupConfig{Driver: CgroupDriverSystemd})
	pod := qosPod("u1", nil, nil)
	specOpts, newOpts := c.opts(pod, "id", 10)
	s := &specs.Spec{}
	for _, o := range specOpts {
		if err := o(context.Background(), nil, nil, s); err != nil {
			t.Fatal(err)
		}
	}
	if s.Linux == nil || s.Linux.CgroupsPath != "staticpod-besteffort-podu1.slice:staticpod:id" {
		t.Errorf("cgroupsPath = %+v", s.Linux)
	}
	if got := s.Annotations[systemdStopTimeout]; got != "uint64 10000000" {
		t.Errorf("%s = %q, want the pod's grace period in µs", systemdStopTimeout, got)
	}
	if len(newOpts) != 1 {
		t.Errorf("systemd: %d container options, want runc's SystemdCgroup", len(newOpts))
	}
	c, _ = newPodCgroups(CgroupConfig{Driver: CgroupDriverCgroupfs})
	if _, newOpts := c.opts(pod, "id", 10); len(newOpts) != 0 {
		t.Errorf("cgroupfs: %d container options, want none", len(newOpts))
	}
}

func TestChooseCgroupDriver(t *testing.T) {
	sd, fs := CgroupDriverSystemd, CgroupDriverCgroupfs
	for _, tc := range []struct {
		asked, containerd CgroupDriver
		booted            bool
		want              CgroupDriver
		mismatch          bool
	}{
		{"", "", false, fs, false},
		{"", "", true, sd, false},
		{"", fs, true, fs, false},
		{"", sd, false, sd, false},
		{fs, "", true, fs, false},
		{sd, sd, true, sd, false},
		{fs, sd, true, "", true},
		{sd, fs, true, "", true},
	} {
		got, err := chooseCgroupDriver(tc.asked, tc.containerd, tc.booted)
		if got != tc.want || (err != nil) != tc.mismatch {
			t.Errorf("chooseCgroupDriver(%q, %q, %t) = %q, %v; want %q, mismatch %t", tc.asked, tc.containerd, tc.booted, got, err, tc.want, tc.mismatch)
		}
		if err != nil && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--cgroup-driver "+string(tc.containerd)) || !strings.Contains(err.Error(), "SystemdCgroup = ")) {
			t.Errorf("mismatch error %q: want an ErrConfig naming both fixes", err)
		}
	}
}

func TestConfigCgroupDriver(t *testing.T) {
	// As containerd 1.6's CRI Status reports its configuration (trimmed).
	const config = `{"containerd":{"snapshotter":"overlayfs","defaultRuntimeName":"runc",
		"runtimes":{"runc":{"runtimeType":"io.containerd.runc.v2","options":{"BinaryName":"","SystemdCgroup":%s}},
		"kata":{"runtimeType":"io.containerd.kata.v2","options":{"SystemdCgroup":true}}}}}`
	for _, tc := range []struct {
		config string
		want   CgroupDriver
	}{
		{strings.Replace(config, "%s", "true", 1), CgroupDriverSystemd},
		{strings.Replace(config, "%s", "false", 1), CgroupDriverCgroupfs},
		{`{"containerd":{"defaultRuntimeName":"runc","runtimes":{"runc":{"runtimeType":"io.containerd.runc.v2"}}}}`, CgroupDriverCgroupfs},
		{`{"containerd":{"defaultRuntimeName":"kata","runtimes":{"kata":{"runtimeType":"io.containerd.kata.v2"}}}}`, ""},
		{"", ""},
	} {
		got, err := configCgroupDriver(tc.config)
		if err != nil || got != tc.want {
			t.Errorf("configCgroupDriver(%.60s...) = %q, %v; want %q", tc.config, got, err, tc.want)
		}
	}
	if _, err := configCgroupDriver("{"); err == nil {
		t.Error("configCgroupDriver of broken JSON: no error")
	}
}

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
	if driver != CgroupDriverCgroupfs || root != "/"+r.cfg.Namespace {
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
	memDir := filepath.Join(cgroupRoot, podDir)
	if !spec.HostCgroups().Unified {
		memDir = filepath.Join(cgroupRoot, "memory", podDir)
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

func TestPodLimits(t *testing.T) {
	res := func(cpu, mem string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	two := func(a, b corev1.ResourceRequirements) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: a}, {Name: "b", Resources: b}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want podLimits
	}{
		{"guaranteed: the sums", two(corev1.ResourceRequirements{Limits: res("100m", "32Mi"), Requests: res("100m", "32Mi")},
			corev1.ResourceRequirements{Limits: res("400m", "16Mi"), Requests: res("400m", "16Mi")}),
			podLimits{memory: 48 << 20, cpuQuota: 50000, cpuShares: 512}},
		{"one container without limits: none", two(corev1.ResourceRequirements{Limits: res("100m", "32Mi")}, corev1.ResourceRequirements{Requests: res("250m", "")}),
			podLimits{cpuShares: 256}},
		{"besteffort", two(corev1.ResourceRequirements{}, corev1.ResourceRequirements{}), podLimits{cpuShares: spec.MinShares}},
	} {
		if got := podLimitsOf(tc.pod); got != tc.want {
			t.Errorf("%s: podLimitsOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if cpuWeight(spec.MinShares) != 1 || cpuWeight(spec.MaxShares) != 10000 || cpuWeight(1024) != 39 {
		t.Errorf("cpuWeight: 2 -> %d, 262144 -> %d, 1024 -> %d; want 1, 10000, 39", cpuWeight(spec.MinShares), cpuWeight(spec.MaxShares), cpuWeight(1024))
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
		filepath.Join(cgroupRoot, dir, "memory.max"): "50331648",
		filepath.Join(cgroupRoot, dir, "cpu.max"):    "20000 100000",
		filepath.Join(cgroupRoot, dir, "pids.max"):   "64",
	}
	if !spec.HostCgroups().Unified {
		want = map[string]string{
			filepath.Join(cgroupRoot, "memory", dir, "memory.limit_in_bytes"): "50331648",
			filepath.Join(cgroupRoot, "cpu", dir, "cpu.cfs_quota_us"):         "20000",
			filepath.Join(cgroupRoot, "cpu", dir, "cpu.shares"):               "204",
			filepath.Join(cgroupRoot, "pids", dir, "pids.max"):                "64",
		}
	}
	for file, v := range want {
		if got := read(file); got != v {
			t.Errorf("%s = %s, want %s", file, got, v)
		}
	}
}
