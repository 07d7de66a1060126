package containerdrt

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/internal/testenv"
)

const specImageRef = "docker.io/library/busybox:spec-test"

// specRun is one container started from the spec staticpod builds for a pod.
type specRun struct {
	t   *testing.T
	d   *testenv.Daemon
	ctx context.Context
	img client.Image
	in  spec.Input
}

// specEndMarker is the last line every test container prints. containerd's Task.Delete
// closes the output FIFOs, so output the shim has not yet copied would be lost: the
// tests wait for this line before deleting.
const specEndMarker = "--spec-test-end--"

// newSpecRun imports a busybox image made with opts and returns a run of the test pod
// "web" whose container "app" runs script with sh, stderr going to stdout, and then
// prints specEndMarker and exits with the script's status.
func newSpecRun(t *testing.T, opts testenv.ImageOptions, script string) *specRun {
	t.Helper()
	d := ctd.Daemon(t)
	ns := d.Namespace(t)
	ctx := d.Context(t, ns)
	opts.Ref = specImageRef
	img := d.MustImportImage(t, ns, opts)
	spec, err := img.Spec(ctx)
	if err != nil {
		t.Fatalf("image config: %v", err)
	}
	in := specTestInput(spec.Config)
	in.PodDir = t.TempDir()
	in.Container.Command = []string{"sh", "-c", "exec 2>&1; (" + script + "\n); rc=$?; echo " + specEndMarker + "; exit $rc"}
	return &specRun{t: t, d: d, ctx: ctx, img: img, in: in}
}

// mustRun creates the container with spec.Process, spec.Resources, spec.Security and
// spec.Cgroups applied after containerd's default spec and the image's config (then
// extra), runs it to its exit, deletes it and its snapshot, and returns its output and
// exit code.
func (r *specRun) mustRun(id string, extra ...oci.SpecOpts) (string, uint32) {
	t := r.t
	t.Helper()
	opts := append([]oci.SpecOpts{oci.WithImageConfig(r.img)}, r.mustBuildSpec()...)
	c, err := r.d.Client.NewContainer(r.ctx, id, client.WithImage(r.img), client.WithNewSnapshot(id+"-snap", r.img),
		client.WithNewSpec(append(opts, extra...)...))
	if err != nil {
		t.Fatalf("create container %s: %v", id, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 30*time.Second)
		defer cancel()
		if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil {
			t.Errorf("delete container %s: %v", id, err)
		}
	}()
	out := newSpecOutput()
	task, err := c.NewTask(r.ctx, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(r.d.FIFODir())))
	if err != nil {
		t.Fatalf("create task %s: %v", id, err)
	}
	defer task.Delete(context.WithoutCancel(r.ctx), client.WithProcessKill) // gone already after a clean exit
	code, err := awaitSpecExit(r.ctx, task, out)
	if err != nil {
		t.Fatalf("run %s: %v; output:\n%s", id, err, out.String())
	}
	if _, err := task.Delete(r.ctx); err != nil {
		t.Fatalf("delete task %s: %v", id, err)
	}
	return strings.TrimSuffix(out.String(), specEndMarker+"\n"), code
}

// mustBuildSpec returns the options staticpod's spec builders make for r's container.
func (r *specRun) mustBuildSpec() []oci.SpecOpts {
	r.t.Helper()
	var opts []oci.SpecOpts
	for _, build := range []func(spec.Input) ([]oci.SpecOpts, error){spec.Process, spec.Resources, spec.Security} {
		o, err := build(r.in)
		if err != nil {
			r.t.Fatalf("build spec: %v", err)
		}
		opts = append(opts, o...)
	}
	return append(opts, spec.Cgroups(r.in, spec.HostCgroups())...)
}

// awaitSpecExit starts task, waits for it to exit and for its output to end with
// specEndMarker, and returns its exit code.
func awaitSpecExit(ctx context.Context, task client.Task, out *specOutput) (uint32, error) {
	exited, err := task.Wait(ctx)
	if err != nil {
		return 0, fmt.Errorf("wait: %w", err)
	}
	if err := task.Start(ctx); err != nil {
		return 0, fmt.Errorf("start: %w", err)
	}
	var status client.ExitStatus
	select {
	case status = <-exited:
	case <-ctx.Done():
		return 0, fmt.Errorf("await exit: %w", ctx.Err())
	}
	select {
	case <-out.ended:
	case <-ctx.Done():
		return 0, fmt.Errorf("exited %d; await output: %w", status.ExitCode(), ctx.Err())
	}
	return status.ExitCode(), status.Error()
}

// mustSucceed runs the container and fails t unless it exits 0.
func (r *specRun) mustSucceed(id string, extra ...oci.SpecOpts) string {
	r.t.Helper()
	out, code := r.mustRun(id, extra...)
	if code != 0 {
		r.t.Fatalf("container %s exited %d; output:\n%s", id, code, out)
	}
	return out
}

// specOutput is a container's output; ended is closed once it ends with specEndMarker.
type specOutput struct {
	mu    sync.Mutex // guards buf and closing ended
	buf   bytes.Buffer
	ended chan struct{}
}

func newSpecOutput() *specOutput { return &specOutput{ended: make(chan struct{})} }

func (b *specOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if strings.HasSuffix(b.buf.String(), specEndMarker+"\n") {
		select {
		case <-b.ended:
		default:
			close(b.ended)
		}
	}
	return n, err
}

func (b *specOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// specKeyValues parses "key=value" and "key: value" lines; later lines win.
func specKeyValues(out string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		} else if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func TestSpecProcessInContainer(t *testing.T) {
	r := newSpecRun(t, testenv.ImageOptions{
		Entrypoint: []string{"/bin/false"}, Cmd: []string{"image-cmd"},
		Env: []string{"IMG=image", "SHARED=image"}, WorkingDir: "/var",
	}, `echo "args=$*"; echo "cwd=$PWD"; env`)
	r.in.Container.Args = []string{"$(A)", "$$(A)", "$(NOPE)", "$(B)"}
	r.in.Container.WorkingDir = "/tmp"
	r.in.Container.Env = []corev1.EnvVar{
		{Name: "SHARED", Value: "pod"}, {Name: "A", Value: "one"}, {Name: "B", Value: "$(A)-two"},
		podtest.FieldEnv("POD_NAME", "metadata.name"), podtest.FieldEnv("POD_UID", "metadata.uid"), podtest.FieldEnv("LABEL", "metadata.labels['app']"),
		podtest.ResourceEnv("CPU_M", "", "limits.cpu", "1m"),
	}
	r.in.Container.Resources.Limits = podtest.Resources("1500m", "")
	got := specKeyValues(r.mustSucceed("process"))
	want := map[string]string{
		// sh -c script arg0 args...: $0 is the first arg, so $* is the rest.
		"args": "$(A) $(NOPE) one-two", "cwd": "/tmp",
		"IMG": "image", "SHARED": "pod", "A": "one", "B": "one-two", "HOSTNAME": "web-node1",
		"POD_NAME": "web-node1", "POD_UID": "uid-1", "LABEL": "web", "CPU_M": "1500",
		"PATH": strings.TrimPrefix(testenv.DefaultPath, "PATH="),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("in the container %s = %q, want %q", k, got[k], v)
		}
	}
}

// specCgroupScript prints the container's own cgroup settings, for cgroup v1 and v2.
const specCgroupScript = `cd /sys/fs/cgroup; for f in cpu/cpu.shares cpu/cpu.cfs_quota_us cpu/cpu.cfs_period_us ` +
	`memory/memory.limit_in_bytes memory/memory.memsw.limit_in_bytes cpu.weight cpu.max memory.max memory.swap.max; ` +
	`do if [ -f $f ]; then echo "$f=` + "`cat $f`" + `"; fi; done`

func TestSpecResourcesInContainer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cpu, memory string
		v1, v2      map[string]string
	}{
		{name: "limited", cpu: "500m", memory: "64Mi",
			v1: map[string]string{"cpu/cpu.shares": "512", "cpu/cpu.cfs_quota_us": "50000", "cpu/cpu.cfs_period_us": "100000", "memory/memory.limit_in_bytes": "67108864"},
			v2: map[string]string{"cpu.max": "50000 100000", "memory.max": "67108864"}},
		{name: "best effort",
			v1: map[string]string{"cpu/cpu.shares": "2", "cpu/cpu.cfs_quota_us": "-1"},
			v2: map[string]string{"cpu.max": "max 100000", "memory.max": "max"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSpecRun(t, testenv.ImageOptions{}, specCgroupScript)
			r.in.Container.Resources = corev1.ResourceRequirements{Requests: podtest.Resources(tc.cpu, tc.memory), Limits: podtest.Resources(tc.cpu, tc.memory)}
			out := r.mustSucceed("resources")
			got := specKeyValues(out)
			want := tc.v1
			if _, ok := got["cpu.max"]; ok {
				want = tc.v2
			}
			if tc.memory != "" && spec.SwapAccounted() {
				want["memory/memory.memsw.limit_in_bytes"] = want["memory/memory.limit_in_bytes"]
				want["memory.swap.max"] = "0"
			}
			for k, v := range want {
				if v != "" && got[k] != v && !(k == "memory.swap.max" && got[k] == "") {
					t.Errorf("%s = %q, want %q; all:\n%s", k, got[k], v, out)
				}
			}
		})
	}
}

func TestSpecUserInContainer(t *testing.T) {
	groups := testenv.File{Content: []byte("root:x:0:\nwheel:x:10:nobody\nnobody:x:65534:\n")}
	for _, tc := range []struct {
		name      string
		imageUser string
		edit      func(spec.Input)
		want      string // id -u, id -g, id -G (sorted)
	}{
		{name: "image USER uid:gid", imageUser: "65534:65534", want: "65534 65534 10 65534"},
		{name: "image root", want: "0 0 0"},
		{name: "runAsUser, runAsGroup, fsGroup, supplementalGroups", imageUser: "nobody", edit: func(in spec.Input) {
			specContainerSC(in).RunAsUser, specContainerSC(in).RunAsGroup = new(int64(65534)), new(int64(3000))
			specPodSC(in).FSGroup, specPodSC(in).SupplementalGroups = new(int64(2000)), []int64{4000}
		}, want: "65534 3000 10 2000 3000 4000"},
		{name: "runAsUser with gid from passwd, runAsNonRoot", edit: func(in spec.Input) {
			specPodSC(in).RunAsUser, specPodSC(in).RunAsNonRoot = new(int64(65534)), new(true)
		}, want: "65534 65534 10 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSpecRun(t, testenv.ImageOptions{User: tc.imageUser, Files: map[string]testenv.File{"etc/group": groups}},
				`echo $(id -u) $(id -g) $(id -G | tr ' ' '\n' | sort -n | tr '\n' ' ')`)
			if tc.edit != nil {
				tc.edit(r.in)
			}
			if got := strings.TrimSpace(r.mustSucceed("user")); got != tc.want {
				t.Errorf("uid gid groups = %q, want %q", got, tc.want)
			}
		})
	}
}

// specStatusScript prints the process status lines the security tests check.
const specStatusScript = `grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status`

// capMask decodes a CapEff hex mask.
func capMask(t *testing.T, hex string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		t.Fatalf("CapEff %q: %v", hex, err)
	}
	return v
}

const (
	capChown    = 0  // CAP_CHOWN
	capKill     = 5  // CAP_KILL
	capNetAdmin = 12 // CAP_NET_ADMIN
	capSysAdmin = 21 // CAP_SYS_ADMIN
)

func TestSpecCapabilitiesInContainer(t *testing.T) {
	r := newSpecRun(t, testenv.ImageOptions{}, specStatusScript)
	specContainerSC(r.in).Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"CHOWN"}}
	out := r.mustSucceed("caps")
	eff := capMask(t, specKeyValues(out)["CapEff"])
	for bit, want := range map[int]bool{capNetAdmin: true, capChown: false, capKill: true, capSysAdmin: false} {
		if got := eff&(1<<bit) != 0; got != want {
			t.Errorf("capability bit %d in CapEff %x = %v, want %v", bit, eff, got, want)
		}
	}
}

func TestSpecPrivilegedInContainer(t *testing.T) {
	r := newSpecRun(t, testenv.ImageOptions{}, specStatusScript+`; grep ' /sys sysfs ' /proc/mounts; ls /dev`)
	specContainerSC(r.in).Privileged = new(true)
	out := r.mustSucceed("privileged")
	own, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	kv := specKeyValues(out)
	if want := specKeyValues(string(own))["CapEff"]; kv["CapEff"] != want {
		t.Errorf("privileged CapEff = %s, want staticpod's own %s", kv["CapEff"], want)
	}
	if kv["Seccomp"] != "0" {
		t.Errorf("privileged Seccomp = %q, want 0", kv["Seccomp"])
	}
	if !strings.Contains(out, " /sys sysfs rw") {
		t.Errorf("/sys is not mounted read-write:\n%s", out)
	}
	if _, err := os.Stat("/dev/kmsg"); err == nil && !slices.Contains(strings.Fields(out), "kmsg") {
		t.Errorf("host device /dev/kmsg missing from a privileged container:\n%s", out)
	}
}

func TestSpecReadOnlyRootInContainer(t *testing.T) {
	r := newSpecRun(t, testenv.ImageOptions{}, `touch /probe && echo wrote; touch /probe 2>&1; exit 0`)
	specContainerSC(r.in).ReadOnlyRootFilesystem = new(true)
	if out := r.mustSucceed("readonly"); strings.Contains(out, "wrote") || !strings.Contains(out, "Read-only file system") {
		t.Errorf("write to / with readOnlyRootFilesystem: %q, want it refused", out)
	}
}

func TestSpecNoNewPrivsInContainer(t *testing.T) {
	for name, tc := range map[string]struct {
		escalation *bool
		want       string
	}{
		"unset": {nil, "0"}, "allowed": {new(true), "0"}, "forbidden": {new(false), "1"},
	} {
		t.Run(name, func(t *testing.T) {
			r := newSpecRun(t, testenv.ImageOptions{}, specStatusScript)
			specContainerSC(r.in).AllowPrivilegeEscalation = tc.escalation
			if got := specKeyValues(r.mustSucceed("nnp"))["NoNewPrivs"]; got != tc.want {
				t.Errorf("NoNewPrivs = %q, want %s", got, tc.want)
			}
		})
	}
}

func TestSpecSeccompInContainer(t *testing.T) {
	dir := t.TempDir()
	podtest.WriteFile(t, filepath.Join(dir, "no-mkdir.json"),
		`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`)
	for _, tc := range []struct {
		name     string
		profile  *corev1.SeccompProfile
		want     string
		mkdirErr bool
	}{
		{"unset", nil, "0", false},
		{"Unconfined", &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}, "0", false},
		{"RuntimeDefault", &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}, "2", false},
		{"Localhost", podtest.LocalhostSeccomp("no-mkdir.json"), "2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSpecRun(t, testenv.ImageOptions{}, specStatusScript+`; mkdir /tmp/d 2>/dev/null && echo mkdir=ok || echo mkdir=refused`)
			r.in.SeccompDir = dir
			specPodSC(r.in).SeccompProfile = tc.profile
			kv := specKeyValues(r.mustSucceed("seccomp"))
			if kv["Seccomp"] != tc.want {
				t.Errorf("Seccomp = %q, want %s", kv["Seccomp"], tc.want)
			}
			if want := map[bool]string{false: "ok", true: "refused"}[tc.mkdirErr]; kv["mkdir"] != want {
				t.Errorf("mkdir %s, want %s", kv["mkdir"], want)
			}
		})
	}
}

// Each container gets the kubelet's oom_score_adj for its QoS class, never below
// staticpod's own (here the test's): a container no longer inherits its shim's score,
// and a Guaranteed one starts although lowering a score needs CAP_SYS_RESOURCE.
func TestSpecOOMScoreInContainer(t *testing.T) {
	own, err := spec.OwnOOMScoreAdj()
	if err != nil {
		t.Fatal(err)
	}
	capacity, err := spec.MemTotal()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		requests, limits corev1.ResourceList
		want             int
	}{
		{name: "best effort", want: max(1000, own)}, // the kubelet's BestEffort score
		{name: "burstable", requests: podtest.Resources("", "64Mi"), limits: podtest.Resources("", "128Mi"),
			want: max(int(1000-1000*(64<<20)/capacity), own)},
		{name: "guaranteed", requests: podtest.Resources("100m", "64Mi"), limits: podtest.Resources("100m", "64Mi"),
			want: max(-997, own)}, // its Guaranteed score
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSpecRun(t, testenv.ImageOptions{}, `echo "oom_score_adj=$(cat /proc/self/oom_score_adj)"`)
			r.in.Container.Resources = corev1.ResourceRequirements{Requests: tc.requests, Limits: tc.limits}
			out := r.mustSucceed("oom")
			if got := specKeyValues(out)["oom_score_adj"]; got != strconv.Itoa(tc.want) {
				t.Errorf("oom_score_adj in the container = %q, want %d (staticpod's own: %d)", got, tc.want, own)
			}
		})
	}
}

// specCgroupfsScript prints the container's memory limit as its cgroupfs shows it, the
// mounts under /sys/fs/cgroup, and tries to write the limit. On cgroup v1 runc mounts
// the container's own directory of each hierarchy on a tmpfs, in which the script
// also tries to make a directory; on v2 the container's cgroup is the root of its own
// namespace, or (privileged) its path in the host's.
const specCgroupfsScript = `f=/sys/fs/cgroup/memory/memory.limit_in_bytes
[ -f /sys/fs/cgroup/cgroup.controllers ] && f=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)/memory.max
echo "limit=$(cat $f)"
grep ' /sys/fs/cgroup' /proc/mounts
if err=$(cat $f 2>&1 > $f); then echo write=ok; else echo "write=refused: $err"; fi
if grep -q '^tmpfs /sys/fs/cgroup ' /proc/mounts; then
	if err=$(mkdir /sys/fs/cgroup/probe 2>&1); then echo mkdir=ok; rmdir /sys/fs/cgroup/probe; else echo "mkdir=refused: $err"; fi
fi
exit 0`

// A container sees its own cgroups at /sys/fs/cgroup, read-only unless privileged,
// so that runtimes that size themselves from their cgroup see their limits. On cgroup
// v1 the tmpfs that holds the hierarchies is read-only too unless privileged.
func TestSpecCgroupfsInContainer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		privileged bool
		write      string
	}{
		{name: "read-only", write: "refused: "},
		{name: "privileged: read-write", privileged: true, write: "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSpecRun(t, testenv.ImageOptions{}, specCgroupfsScript)
			r.in.Container.Resources = corev1.ResourceRequirements{Requests: podtest.Resources("", "64Mi"), Limits: podtest.Resources("", "64Mi")}
			if tc.privileged {
				specContainerSC(r.in).Privileged = new(true)
			}
			out := r.mustSucceed("cgroupfs")
			kv := specKeyValues(out)
			if kv["limit"] != "67108864" {
				t.Errorf("memory limit in the container = %q, want 67108864; output:\n%s", kv["limit"], out)
			}
			if !strings.HasPrefix(kv["write"], tc.write) || tc.write != "ok" && !strings.Contains(kv["write"], "Read-only file system") {
				t.Errorf("write to the memory limit: %q, want %q; output:\n%s", kv["write"], tc.write, out)
			}
			mode, mounts, tmpfs := "ro", 0, ""
			if tc.privileged {
				mode = "rw"
			}
			for line := range strings.Lines(out) {
				// /proc/mounts: source, mount point, type, options
				f := strings.Fields(line)
				if len(f) >= 4 && f[1] == cgroups.MountPoint && f[2] == "tmpfs" {
					tmpfs = line // the last one: stacked mounts are listed bottom up
				}
				if len(f) < 4 || !strings.HasPrefix(f[1], cgroups.MountPoint) || (f[2] != "cgroup" && f[2] != "cgroup2") {
					continue
				}
				mounts++
				if opts := strings.Split(f[3], ","); !slices.Contains(opts, mode) {
					t.Errorf("cgroup mount %q, want it %s", strings.TrimSpace(line), mode)
				}
			}
			if mounts == 0 {
				t.Errorf("no cgroup mount under /sys/fs/cgroup; output:\n%s", out)
			}
			if spec.HostCgroups().Unified {
				return
			}
			if f := strings.Fields(tmpfs); len(f) < 4 || !slices.Contains(strings.Split(f[3], ","), mode) {
				t.Errorf("tmpfs at /sys/fs/cgroup %q, want it %s; output:\n%s", strings.TrimSpace(tmpfs), mode, out)
			}
			if !strings.HasPrefix(kv["mkdir"], tc.write) || tc.write != "ok" && !strings.Contains(kv["mkdir"], "Read-only file system") {
				t.Errorf("mkdir in /sys/fs/cgroup: %q, want %q; output:\n%s", kv["mkdir"], tc.write, out)
			}
		})
	}
}
