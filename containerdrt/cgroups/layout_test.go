package cgroups

import (
	"context"
	"path"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
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
		cfg       Config
		pod, want string
		dir       string // where the container's cgroup is in the cgroup filesystem
	}{
		{Config{Driver: Cgroupfs}, "guaranteed", "/staticpod/pod0123-abcd/web_c_0_0123abcd", "/staticpod/pod0123-abcd/web_c_0_0123abcd"},
		{Config{Driver: Cgroupfs, Root: "/k8s/static/"}, "burstable", "/k8s/static/burstable/pod0123-abcd/web_c_0_0123abcd", "/k8s/static/burstable/pod0123-abcd/web_c_0_0123abcd"},
		{Config{}, "besteffort", "/staticpod/besteffort/pod0123-abcd/web_c_0_0123abcd", "/staticpod/besteffort/pod0123-abcd/web_c_0_0123abcd"},
		{Config{Driver: Systemd}, "guaranteed",
			"staticpod-pod0123_abcd.slice:staticpod:web_c_0_0123abcd",
			"/staticpod.slice/staticpod-pod0123_abcd.slice/staticpod-web_c_0_0123abcd.scope"},
		{Config{Driver: Systemd}, "burstable",
			"staticpod-burstable-pod0123_abcd.slice:staticpod:web_c_0_0123abcd",
			"/staticpod.slice/staticpod-burstable.slice/staticpod-burstable-pod0123_abcd.slice/staticpod-web_c_0_0123abcd.scope"},
		{Config{Driver: Systemd, Root: "system-static.slice"}, "besteffort",
			"system-static-besteffort-pod0123_abcd.slice:staticpod:web_c_0_0123abcd",
			"/system.slice/system-static.slice/system-static-besteffort.slice/system-static-besteffort-pod0123_abcd.slice/staticpod-web_c_0_0123abcd.scope"},
	} {
		c, err := New(tc.cfg)
		if err != nil {
			t.Fatalf("New(%+v): %v", tc.cfg, err)
		}
		got := c.Container(pods[tc.pod], "web_c_0_0123abcd")
		if got != tc.want {
			t.Errorf("%+v: Container(%s pod) = %q, want %q", tc.cfg, tc.pod, got, tc.want)
		}
		if dir := Dir(got); dir != tc.dir {
			t.Errorf("Dir(%q) = %q, want %q", got, dir, tc.dir)
		}
		if dir := c.PodDir(pods[tc.pod]); dir != path.Dir(tc.dir) {
			t.Errorf("%+v: PodDir(%s pod) = %q, want the container's parent %q", tc.cfg, tc.pod, dir, path.Dir(tc.dir))
		}
	}
}

// A UID that is not a plain token never names a cgroup outside the QoS class's: the
// runtime refuses such pods before, and the name stays one entry all the same.
func TestPodCgroupOfAForgedUIDStaysInside(t *testing.T) {
	for _, driver := range []Driver{Cgroupfs, Systemd} {
		c, err := New(Config{Driver: driver})
		if err != nil {
			t.Fatal(err)
		}
		for _, uid := range []types.UID{"a/../../../../tmp/x", "*", "", ".."} {
			got := c.podIn("burstable", uid)
			dir := Dir(got + ":staticpod:id")
			if driver == Cgroupfs {
				dir = got
			}
			if strings.Contains(got, "/..") || strings.Contains(got, "*") || !strings.HasPrefix(path.Clean(dir), "/staticpod") {
				t.Errorf("%s: podIn(burstable, %q) = %q (%s), outside /staticpod", driver, uid, got, dir)
			}
			if err := c.RemovePod(t.Context(), uid); err == nil {
				t.Errorf("%s: RemovePod(%q) = nil, want an error", driver, uid)
			}
		}
	}
}

func TestPodCgroupsRefusesAMismatchedRoot(t *testing.T) {
	for _, cfg := range []Config{
		{Driver: Cgroupfs, Root: "staticpod"},
		{Driver: Cgroupfs, Root: "/staticpod.slice"},
		{Driver: Systemd, Root: "/staticpod"},
		{Driver: Systemd, Root: "-.slice"},
		{Driver: Systemd, Root: "a--b.slice"},
		{Driver: "lxc"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error, want one", cfg)
		}
	}
}

func TestCgroupDirOfTheDefaultSpec(t *testing.T) {
	// Containers made before pod cgroups carry containerd's default /<namespace>/<id>.
	if got := Dir("/staticpod/web_c_0_x"); got != "/staticpod/web_c_0_x" {
		t.Errorf("Dir = %q", got)
	}
	if got := Dir("system.slice:docker:abc"); got != "/system.slice/docker-abc.scope" {
		t.Errorf("Dir = %q", got)
	}
}

func TestCgroupOptsSystemd(t *testing.T) {
	c, _ := New(Config{Driver: Systemd})
	pod := qosPod("u1", nil, nil)
	pod.Spec.TerminationGracePeriodSeconds = new(int64(10))
	specOpts, newOpts := c.Opts(c.Pod(pod), "id", GraceSeconds(pod))
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
	c, _ = New(Config{Driver: Cgroupfs})
	if _, newOpts := c.Opts(c.Pod(pod), "id", GraceSeconds(pod)); len(newOpts) != 0 {
		t.Errorf("cgroupfs: %d container options, want none", len(newOpts))
	}
}
