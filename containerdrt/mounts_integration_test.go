package containerdrt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/containerdrt/poddir"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
)

const mountsImageRef = "docker.io/library/busybox:mounts-test"

// mountsEnv runs containers of test pods on the shared daemon, in a namespace of the
// test's own. The pods' /etc files start from the host's.
type mountsEnv struct {
	t       *testing.T
	d       *testenv.Daemon
	ctx     context.Context
	img     client.Image
	attempt int // of the containers it runs: names their termination logs
}

func newMountsEnv(t *testing.T) *mountsEnv {
	t.Helper()
	d := ctd.Daemon(t)
	ns := d.Namespace(t)
	return &mountsEnv{t: t, d: d, ctx: d.Context(t, ns), img: d.MustImportImage(t, ns, testenv.ImageOptions{Ref: mountsImageRef})}
}

// mustPrepare prepares pod's dir under the test's temporary directory. When the test
// ends it is removed with poddir.Remove, which must leave nothing mounted.
func (e *mountsEnv) mustPrepare(pod *corev1.Pod, podIP string) string {
	t := e.t
	t.Helper()
	podDir := filepath.Join(t.TempDir(), "pods", string(pod.UID))
	t.Cleanup(func() {
		if err := poddir.Remove(podDir); err != nil {
			t.Errorf("poddir.Remove: %v", err)
		}
		if m := podtest.MountsAt(t, filepath.Dir(podDir)); len(m) > 0 {
			t.Errorf("mounts left under %s: %v", podDir, podtest.DescribeMounts(m))
		}
		if _, err := os.Stat(podDir); !os.IsNotExist(err) {
			t.Errorf("pod dir after poddir.Remove: %v, want it gone", err)
		}
	})
	if err := poddir.PreparePod(pod, podDir, podDir, "192.0.2.10", manifests.Objects{}); err != nil {
		t.Fatalf("poddir.PreparePod: %v", err)
	}
	return podDir
}

// mustRun runs the pod's container named container with the mounts e.mountOpts gives it
// (and extra options) on the host's network, running script with sh, to its exit. The
// container and its snapshot are deleted. It returns the output and exit code.
func (e *mountsEnv) mustRun(pod *corev1.Pod, podDir, container, script string, extra ...oci.SpecOpts) (string, uint32) {
	t := e.t
	t.Helper()
	opts, err := e.mountOpts(pod, podDir, container)
	if err != nil {
		t.Fatalf("mountOpts(%s): %v", container, err)
	}
	id := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())) + "-" + pod.Name + "-" + container
	return e.run(id, script, append(opts, extra...)...)
}

// mountOpts prepares the host side of the mounts of the pod's container named
// container and returns the options spec.Mounts makes of them.
func (e *mountsEnv) mountOpts(pod *corev1.Pod, podDir, container string) ([]oci.SpecOpts, error) {
	in := spec.Input{Pod: pod, Attempt: e.attempt, PodDir: podDir, RunDir: podDir, PodIP: "127.0.0.1", HostIP: "192.0.2.10"}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			in.Container = &pod.Spec.Containers[i]
		}
	}
	var err error
	if in.Prepared, err = poddir.PrepareContainer(in); err != nil {
		return nil, err
	}
	return spec.Mounts(in)
}

// run runs script with sh in a container id made with opts on the host's network, to
// its exit, and deletes the container and its snapshot. It returns the output and exit
// code.
func (e *mountsEnv) run(id, script string, opts ...oci.SpecOpts) (string, uint32) {
	t := e.t
	t.Helper()
	opts = append([]oci.SpecOpts{oci.WithImageConfig(e.img), oci.WithProcessArgs("sh", "-c", script), oci.WithHostNamespace(specs.NetworkNamespace)}, opts...)
	c, err := e.d.Client.NewContainer(e.ctx, id, client.WithImage(e.img), client.WithNewSnapshot(id+"-snap", e.img), client.WithNewSpec(opts...))
	if err != nil {
		t.Fatalf("create container %s: %v", id, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), 30*time.Second)
		defer cancel()
		if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil {
			t.Errorf("delete container %s: %v", id, err)
		}
	}()
	return e.runTask(c)
}

func (e *mountsEnv) runTask(c client.Container) (string, uint32) {
	t := e.t
	t.Helper()
	var out testenv.Buffer
	task, err := c.NewTask(e.ctx, cio.NewCreator(cio.WithStreams(nil, &out, &out), cio.WithFIFODir(e.d.FIFODir())))
	if err != nil {
		t.Fatalf("create task %s: %v", c.ID(), err)
	}
	status, err := testenv.RunTask(e.ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), status.ExitCode()
}

// mustSucceed is mustRun for a script that must exit 0.
func (e *mountsEnv) mustSucceed(pod *corev1.Pod, podDir, container, script string, extra ...oci.SpecOpts) string {
	e.t.Helper()
	out, code := e.mustRun(pod, podDir, container, script, extra...)
	if code != 0 {
		e.t.Fatalf("container %s exited with %d:\n%s", container, code, out)
	}
	return out
}

func hostPathVolume(name, path string, typ corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &typ}}}
}

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("output lacks line %q:\n%s", w, out)
		}
	}
}

func TestMountsHostPathInContainer(t *testing.T) {
	e := newMountsEnv(t)
	dir := t.TempDir()
	podtest.WriteFile(t, filepath.Join(dir, "greeting"), "hello from the host\n")
	conf := filepath.Join(t.TempDir(), "app.conf")
	podtest.WriteFile(t, conf, "key=value\n")
	pod := podtest.Pod("web")
	pod.Spec.Volumes = []corev1.Volume{hostPathVolume("data", dir, corev1.HostPathDirectory), hostPathVolume("conf", conf, corev1.HostPathFile)}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/ro", ReadOnly: true},
		{Name: "data", MountPath: "/rw"},
		{Name: "conf", MountPath: "/etc/app.conf", ReadOnly: true},
	}
	podDir := e.mustPrepare(pod, "127.0.0.1")
	out := e.mustSucceed(pod, podDir, "app", `cat /ro/greeting /etc/app.conf
if touch /ro/new 2>/dev/null; then echo ro-writable; else echo ro-refused; fi
echo written > /rw/from-container`)
	wantLines(t, out, "hello from the host", "key=value", "ro-refused")
	if got := podtest.ReadFile(t, filepath.Join(dir, "from-container")); got != "written\n" {
		t.Errorf("file the container wrote through the rw mount = %q, want %q", got, "written\n")
	}
}

// recursiveReadOnly: Enabled makes a volume read-only down to the mounts below its
// source, where a plain readOnly bind leaves them writable: the container writes into a
// tmpfs mounted inside a hostPath directory through each kind of mount.
func TestMountsRecursiveReadOnlyInContainer(t *testing.T) {
	e := newMountsEnv(t)
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount a tmpfs at %s: %v", sub, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(sub, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", sub, err)
		}
	})
	enabled := corev1.RecursiveReadOnlyEnabled
	pod := podtest.Pod("web")
	pod.Spec.Volumes = []corev1.Volume{hostPathVolume("data", dir, corev1.HostPathDirectory)}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/ro", ReadOnly: true},
		{Name: "data", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: &enabled},
	}
	podDir := e.mustPrepare(pod, "127.0.0.1")
	out := e.mustSucceed(pod, podDir, "app", `for m in ro rro; do
  if touch /$m/top-$m 2>/dev/null; then echo "$m top writable"; else echo "$m top refused"; fi
  if touch /$m/sub/in-$m 2>/dev/null; then echo "$m sub writable"; else echo "$m sub refused"; fi
done`)
	wantLines(t, out, "ro top refused", "ro sub writable", "rro top refused", "rro sub refused")
	if _, err := os.Stat(filepath.Join(sub, "in-rro")); !os.IsNotExist(err) {
		t.Errorf("the file written through the recursively read-only mount: %v, want none", err)
	}
}

func TestMountsEmptyDirSharedInContainers(t *testing.T) {
	e := newMountsEnv(t)
	limit := resource.MustParse("16Mi")
	pod := podtest.Pod("web")
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &limit}}},
	}
	mounts := []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "mem", MountPath: "/mem"}}
	pod.Spec.Containers = []corev1.Container{{Name: "writer", VolumeMounts: mounts}, {Name: "reader", VolumeMounts: mounts}}
	podDir := e.mustPrepare(pod, "127.0.0.1")
	e.mustSucceed(pod, podDir, "writer", "echo on-disk > /scratch/msg; echo in-memory > /mem/msg")
	if err := poddir.PreparePod(pod, podDir, podDir, "192.0.2.10", manifests.Objects{}); err != nil { // as before each container
		t.Fatal(err)
	}
	out := e.mustSucceed(pod, podDir, "reader", "cat /scratch/msg /mem/msg; grep ' /mem ' /proc/mounts; df -k /mem | tail -n 1")
	wantLines(t, out, "on-disk", "in-memory")
	if !strings.Contains(out, "tmpfs /mem tmpfs rw") || !strings.Contains(out, "size=16384k") {
		t.Errorf("/mem in the container is not a 16 MiB tmpfs:\n%s", out)
	}
	if fields := strings.Fields(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]); len(fields) < 2 || fields[1] != "16384" {
		t.Errorf("df /mem = %v, want 16384 KiB", fields)
	}
}

func TestMountsDownwardAPIInContainer(t *testing.T) {
	e := newMountsEnv(t)
	pod := podtest.Pod("web")
	pod.Labels = map[string]string{"app": "web", "tier": "front"}
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
	field := func(p string) *corev1.ObjectFieldSelector {
		return &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: p}
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
		{Path: "name", FieldRef: field("metadata.name")},
		{Path: "labels", FieldRef: field("metadata.labels")},
		{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
	}}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "info", MountPath: "/etc/podinfo"}}
	podDir := e.mustPrepare(pod, "127.0.0.1")
	out := e.mustSucceed(pod, podDir, "app", `for f in name labels mem; do cat /etc/podinfo/$f; echo; done
if touch /etc/podinfo/new 2>/dev/null; then echo writable; else echo read-only; fi`)
	wantLines(t, out, "web", `app="web"`, `tier="front"`, "32", "read-only")
}

func TestMountsSubPathInContainer(t *testing.T) {
	e := newMountsEnv(t)
	dir := t.TempDir()
	podtest.WriteFile(t, filepath.Join(dir, "top-level"), "x")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	podtest.WriteFile(t, filepath.Join(dir, "sub", "inner"), "x")
	pod := podtest.Pod("web")
	pod.Spec.Volumes = []corev1.Volume{hostPathVolume("data", dir, corev1.HostPathDirectory)}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/sub", SubPath: "sub"}}
	podDir := e.mustPrepare(pod, "127.0.0.1")
	if out := e.mustSucceed(pod, podDir, "app", "ls -A /sub"); out != "inner\n" {
		t.Errorf("ls /sub = %q, want only the sub directory's %q", out, "inner\n")
	}
}

func TestMountsEtcFilesInContainer(t *testing.T) {
	e := newMountsEnv(t)
	pod := podtest.Pod("web")
	pod.Spec.HostAliases = []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db.local", "cache.local"}}}
	pod.Spec.DNSPolicy = corev1.DNSNone // the pod's own resolver configuration, whatever the host's
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.9.8.7"}, Searches: []string{"pods.local"}}
	podDir := e.mustPrepare(pod, "127.0.0.1")
	out := e.mustSucceed(pod, podDir, "app", "cat /etc/hosts /etc/resolv.conf /etc/hostname")
	wantLines(t, out, "# Kubernetes-managed hosts file.", "127.0.0.1\tweb", "10.1.2.3\tdb.local\tcache.local", "nameserver 10.9.8.7", "web")
	if !strings.Contains(out, "search ") || !strings.Contains(out, "pods.local") {
		t.Errorf("resolv.conf lacks the search path pods.local:\n%s", out)
	}

	hostPod := podtest.Pod("etcd")
	hostPod.UID = "uid-host"
	hostPod.Spec.HostNetwork = true
	hostPod.Spec.HostAliases = pod.Spec.HostAliases
	hostDir := e.mustPrepare(hostPod, "")
	out = e.mustSucceed(hostPod, hostDir, "app", "head -n 1 /etc/hosts; tail -n 1 /etc/hosts")
	wantLines(t, out, "# Kubernetes-managed hosts file (host network).", "10.1.2.3\tdb.local\tcache.local")
}

// The container writes its termination message as a user other than root; the
// runtime reads it from the host file for the attempt.
func TestMountsTerminationMessageInContainer(t *testing.T) {
	e := newMountsEnv(t)
	e.attempt = 1
	pod := podtest.Pod("web")
	podDir := e.mustPrepare(pod, "127.0.0.1")
	e.mustSucceed(pod, podDir, "app", "echo 'failed: disk full' > /dev/termination-log", oci.WithUserID(65534))
	if got := podtest.ReadFile(t, poddir.TerminationLogPath(podDir, "app", 1)); got != "failed: disk full\n" {
		t.Errorf("termination log on the host = %q, want %q", got, "failed: disk full\n")
	}
}
