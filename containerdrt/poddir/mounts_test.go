package poddir

import (
	stdcmp "cmp"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/runner"
)

// hostPathPod is a prepared pod whose container mounts one hostPath volume "vol" at
// /vol; edit sets the volume and the mount up.
func hostPathPod(t *testing.T, path string, typ corev1.HostPathType, edit func(*corev1.Pod)) spec.Input {
	t.Helper()
	pod := podtest.Pod("web")
	pod.Spec.Volumes = []corev1.Volume{{Name: "vol", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &typ}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "vol", MountPath: "/vol"}}
	if edit != nil {
		edit(pod)
	}
	return prepared(t, pod)
}

// prepared prepares pod's dir and returns the input PrepareContainer gets for its
// first container.
func prepared(t *testing.T, pod *corev1.Pod) spec.Input {
	t.Helper()
	fakeHostFiles(t, "127.0.0.1 localhost\n", "nameserver 192.0.2.53\n")
	podDir := mustPreparePod(t, pod, "127.0.0.1")
	return spec.Input{Pod: pod, Container: &pod.Spec.Containers[0], PodDir: podDir, RunDir: podDir, PodIP: "127.0.0.1", HostIP: "192.0.2.10"}
}

// applyMounts prepares the host side of the container's mounts and applies the mounts
// spec.Mounts makes of them to a spec holding containerd's default mounts.
func applyMounts(t *testing.T, in spec.Input) (*specs.Spec, error) {
	t.Helper()
	var err error
	if in.Prepared, err = PrepareContainer(in); err != nil {
		return nil, err
	}
	opts, err := spec.Mounts(in)
	if err != nil {
		t.Fatalf("spec.Mounts of a prepared container: %v", err)
	}
	s := &specs.Spec{Mounts: []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs"},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm"},
	}}
	for _, opt := range opts {
		if err := opt(context.Background(), nil, &containers.Container{}, s); err != nil {
			t.Fatalf("apply mount option: %v", err)
		}
	}
	return s, nil
}

func mountAt(spec *specs.Spec, dst string) *specs.Mount {
	for i := range spec.Mounts {
		if spec.Mounts[i].Destination == dst {
			return &spec.Mounts[i]
		}
	}
	return nil
}

func TestHostPathTypes(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	podtest.WriteFile(t, file, "x")
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	block := filepath.Join(dir, "block")
	if err := unix.Mknod(block, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path    string
		typ     corev1.HostPathType
		wantErr string
	}{
		{dir, corev1.HostPathUnset, ""},
		{filepath.Join(dir, "unset/missing"), corev1.HostPathUnset, ""}, // created, as containerd's CRI does
		{dir, corev1.HostPathDirectory, ""},
		{file, corev1.HostPathDirectory, "hostPath " + file + " is not a directory (type Directory) but a file"},
		{filepath.Join(dir, "missing"), corev1.HostPathDirectory, "hostPath " + dir + "/missing does not exist (type Directory)"},
		{filepath.Join(dir, "a/b/c"), corev1.HostPathDirectoryOrCreate, ""},
		{file, corev1.HostPathDirectoryOrCreate, "is not a directory (type DirectoryOrCreate) but a file"},
		{file, corev1.HostPathFile, ""},
		{dir, corev1.HostPathFile, "is not a file (type File) but a directory"},
		{filepath.Join(dir, "new-file"), corev1.HostPathFileOrCreate, ""},
		{filepath.Join(dir, "no-parent/new-file"), corev1.HostPathFileOrCreate, "create hostPath file " + dir + "/no-parent/new-file"},
		{sock, corev1.HostPathSocket, ""},
		{file, corev1.HostPathSocket, "is not a socket file (type Socket) but a file"},
		{"/dev/null", corev1.HostPathCharDev, ""},
		{block, corev1.HostPathCharDev, "is not a character device (type CharDevice) but a block device"},
		{block, corev1.HostPathBlockDev, ""},
		{"/dev/null", corev1.HostPathBlockDev, "is not a block device (type BlockDevice) but a character device"},
	}
	for _, tt := range tests {
		t.Run(stdcmp.Or(string(tt.typ), "Unset")+strings.ReplaceAll(strings.TrimPrefix(tt.path, dir), "/", "_"), func(t *testing.T) {
			spec, err := applyMounts(t, hostPathPod(t, tt.path, tt.typ, nil))
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), tt.wantErr) ||
					!strings.Contains(err.Error(), `container "app": volume "vol": `) {
					t.Errorf("PrepareContainer = %v, want a %v naming the container and volume, containing %q", err, runner.ErrCreateConfig, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("PrepareContainer: %v", err)
			}
			if m := mountAt(spec, "/vol"); m == nil || m.Source != tt.path {
				t.Errorf("mount at /vol = %+v, want a bind of %s", m, tt.path)
			}
		})
	}
	for path, mode := range map[string]os.FileMode{
		filepath.Join(dir, "a/b/c"):    os.ModeDir | hostPathDirMode,
		filepath.Join(dir, "a"):        os.ModeDir | hostPathDirMode,
		filepath.Join(dir, "new-file"): hostPathFileMode,
	} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
			t.Errorf("created %s: mode %v, %v; want %v", path, fi.Mode(), err, mode)
		}
	}
}

func TestMountOptions(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	in := hostPathPod(t, dir, corev1.HostPathDirectory, func(pod *corev1.Pod) {
		pod.Spec.Volumes = append(pod.Spec.Volumes,
			corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}})
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "scratch", MountPath: "/vol/sub/deeper"},
			{Name: "vol", MountPath: "/vol", ReadOnly: true},
			{Name: "info", MountPath: "/etc/podinfo"},
		}
	})
	spec, err := applyMounts(t, in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range spec.Mounts {
		got = append(got, m.Destination+" "+strings.TrimPrefix(m.Source, in.PodDir)+" "+strings.Join(m.Options, ","))
	}
	want := []string{
		"/proc proc ",
		"/dev tmpfs ",
		"/dev/shm shm ", // kept: no sandbox, so the default private tmpfs
		"/vol " + dir + " rbind,rprivate,ro",
		"/etc/podinfo /volumes/info rbind,rprivate,ro", // downwardAPI: read-only
		"/etc/hosts /etc-hosts rbind,rprivate,rw",
		"/etc/hostname /hostname rbind,rprivate,rw",
		"/etc/resolv.conf /resolv.conf rbind,rprivate,rw",
		"/dev/termination-log /containers/app/0.termination-log rbind,rprivate,rw",
		"/vol/sub/deeper /volumes/scratch rbind,rprivate,rw", // after its parent /vol
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if spec.Linux != nil && spec.Linux.RootfsPropagation != "" {
		t.Errorf("rootfs propagation = %q, want it unset without propagating mounts", spec.Linux.RootfsPropagation)
	}
}

func TestManagedFilesSkippedOrReadOnly(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	spec, err := applyMounts(t, hostPathPod(t, dir, corev1.HostPathDirectory, func(pod *corev1.Pod) {
		pod.Spec.Containers[0].VolumeMounts[0].MountPath = "/etc/hosts/"
		pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: new(true)}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if m := mountAt(spec, "/etc/hosts/"); m == nil || m.Source != dir {
		t.Errorf("/etc/hosts = %+v, want the container's own volume only", m)
	}
	if m := mountAt(spec, "/etc/hosts"); m != nil {
		t.Errorf("the pod's /etc/hosts is mounted over the container's: %+v", m)
	}
	for _, dst := range []string{"/etc/hostname", "/etc/resolv.conf"} {
		if m := mountAt(spec, dst); m == nil || !strings.HasSuffix(strings.Join(m.Options, ","), ",ro") {
			t.Errorf("%s = %+v, want read-only with a read-only root filesystem", dst, m)
		}
	}
}

func TestMountPropagation(t *testing.T) {
	requireRoot(t)
	private := t.TempDir()
	shared := sharedMount(t)
	prop := func(p corev1.MountPropagationMode) *corev1.MountPropagationMode { return &p }
	tests := []struct {
		name       string
		path       string
		mode       *corev1.MountPropagationMode
		privileged bool
		wantOpt    string
		wantRoot   string
		wantErr    string
	}{
		{"unset", private, nil, false, "rprivate", "", ""},
		{"None", private, prop(corev1.MountPropagationNone), false, "rprivate", "", ""},
		{"HostToContainer", shared, prop(corev1.MountPropagationHostToContainer), false, "rslave", "rslave", ""},
		{"HostToContainer on a private mount", private, prop(corev1.MountPropagationHostToContainer), false, "", "", "neither shared nor slave"},
		{"Bidirectional", shared, prop(corev1.MountPropagationBidirectional), true, "rshared", "rshared", ""},
		{"Bidirectional unprivileged", shared, prop(corev1.MountPropagationBidirectional), false, "", "", "mount propagation Bidirectional needs a privileged container"},
		{"Bidirectional on a private mount", private, prop(corev1.MountPropagationBidirectional), true, "", "", "which is not shared"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := applyMounts(t, hostPathPod(t, tt.path, corev1.HostPathDirectory, func(pod *corev1.Pod) {
				pod.Spec.Containers[0].VolumeMounts[0].MountPropagation = tt.mode
				pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &tt.privileged}
			}))
			if tt.wantErr != "" {
				if !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("PrepareContainer = %v, want a %v containing %q", err, runner.ErrCreateConfig, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m := mountAt(spec, "/vol"); m == nil || !strings.Contains(strings.Join(m.Options, ","), ","+tt.wantOpt+",") {
				t.Errorf("mount at /vol = %+v, want option %s", m, tt.wantOpt)
			}
			var root string
			if spec.Linux != nil {
				root = spec.Linux.RootfsPropagation
			}
			if root != tt.wantRoot {
				t.Errorf("rootfs propagation = %q, want %q", root, tt.wantRoot)
			}
		})
	}
}

// sharedMount returns a directory that is a shared mount point (a bind of itself),
// unmounted when t ends.
func sharedMount(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("make %s shared: %v", dir, err)
	}
	return dir
}

func TestSubPath(t *testing.T) {
	requireRoot(t)
	outside := t.TempDir()
	vol := t.TempDir()
	if err := os.Chmod(vol, 0o711); err != nil {
		t.Fatal(err)
	}
	for _, link := range []struct{ name, target string }{{"escape", outside}, {"inside", "data"}, {"up", "../"}} {
		if err := os.Symlink(link.target, filepath.Join(vol, link.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(vol, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		subPath, wantSource, wantErr string
	}{
		{"data", vol + "/data", ""},
		{"inside", vol + "/data", ""},
		{"new/dir", vol + "/new/dir", ""},
		{"../etc", "", `subPath "../etc" must be a relative path without '..'`},
		{"/etc", "", `subPath "/etc" must be a relative path without '..'`},
		{"escape", "", `failed to prepare subPath for volumeMount "vol" of container "app": subPath "escape" leads outside the volume`},
		{"escape/new", "", `subPath "escape/new"`},
		{"up/x", "", `subPath "up/x"`},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.subPath, "/", "_"), func(t *testing.T) {
			spec, err := applyMounts(t, hostPathPod(t, vol, corev1.HostPathDirectory, func(pod *corev1.Pod) {
				pod.Spec.Containers[0].VolumeMounts[0].SubPath = tt.subPath
			}))
			if tt.wantErr != "" {
				if !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("PrepareContainer = %v, want a %v containing %q", err, runner.ErrCreateConfig, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m := mountAt(spec, "/vol"); m == nil || !sameFile(m.Source, tt.wantSource) || !strings.Contains(m.Source, "/"+volumeSubpathsDir+"/vol/app/0") {
				t.Errorf("mount at /vol = %+v, want a source in the pod's %s that holds %s", m, volumeSubpathsDir, tt.wantSource)
			}
		})
	}
	if fi, err := os.Stat(filepath.Join(vol, "new/dir")); err != nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("created subPath: %v, %v; want mode 0711, the volume's", fi, err)
	}
	for _, p := range []string{filepath.Join(outside, "new"), filepath.Join(filepath.Dir(vol), "x")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created outside the volume", p)
		}
	}
}

func TestSubPathExpr(t *testing.T) {
	requireRoot(t)
	vol := t.TempDir()
	in := hostPathPod(t, vol, corev1.HostPathDirectory, func(pod *corev1.Pod) {
		pod.Spec.Containers[0].Env = []corev1.EnvVar{
			{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			{Name: "DIR", Value: "logs-$(POD)"},
		}
		pod.Spec.Containers[0].VolumeMounts[0].SubPathExpr = "$(DIR)/$$x"
	})
	spec, err := applyMounts(t, in)
	if err != nil {
		t.Fatal(err)
	}
	if m := mountAt(spec, "/vol"); m == nil || !sameFile(m.Source, vol+"/logs-web/$x") {
		t.Errorf("mount at /vol = %+v, want a source that holds %s", m, vol+"/logs-web/$x")
	}
	in.Container.VolumeMounts[0].SubPathExpr = "$(NOPE)"
	if _, err := applyMounts(t, in); !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), "missing value for NOPE") {
		t.Errorf("PrepareContainer with an unset variable = %v, want %q", err, "missing value for NOPE")
	}
}

func TestShmMount(t *testing.T) {
	requireRoot(t)
	t.Run("hostIPC binds the host's", func(t *testing.T) {
		pod := podtest.Pod("web")
		pod.Spec.HostIPC = true
		spec, err := applyMounts(t, prepared(t, pod))
		if err != nil {
			t.Fatal(err)
		}
		if m := mountAt(spec, devShm); m == nil || m.Source != devShm || m.Type != "bind" {
			t.Errorf("/dev/shm = %+v, want a bind of the host's", m)
		}
	})
	t.Run("a sandbox gives the pod one tmpfs", func(t *testing.T) {
		in := prepared(t, podtest.Pod("web"))
		in.SandboxNS = "/proc/self/ns" // any sandbox: only "has a sandbox" matters
		for range 2 {
			spec, err := applyMounts(t, in)
			if err != nil {
				t.Fatal(err)
			}
			if m := mountAt(spec, devShm); m == nil || m.Source != filepath.Join(in.PodDir, shmDir) {
				t.Errorf("/dev/shm = %+v, want a bind of the pod's shm", m)
			}
		}
		mounts := podtest.MountsAt(t, in.PodDir)
		if len(mounts) != 1 || mounts[0].FSType != "tmpfs" || !strings.Contains(mounts[0].VFSOptions, "size=65536k") {
			t.Errorf("mounts under the pod dir = %v, want one 64 MiB tmpfs", podtest.DescribeMounts(mounts))
		}
	})
}

func TestTerminationMount(t *testing.T) {
	in := prepared(t, podtest.Pod("web"))
	in.Attempt = 2
	old := unix.Umask(0o077)
	spec, err := applyMounts(t, in)
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	path := TerminationLogPath(in.PodDir, "app", 2)
	want := specs.Mount{Destination: "/dev/termination-log", Type: "bind", Source: path, Options: []string{"rbind", "rprivate", "rw"}}
	if m := mountAt(spec, "/dev/termination-log"); m == nil || !cmp.Equal(*m, want) {
		t.Errorf("termination mount = %+v, want %+v", m, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode() != terminationLogMode || fi.Size() != 0 {
		t.Errorf("termination log: %v, %v; want an empty file with mode 0666 whatever the umask", fi, err)
	}
	in.Container.TerminationMessagePath = ""
	in.Attempt = 3
	if p, err := PrepareContainer(in); p.TerminationLog != "" || err != nil {
		t.Errorf("PrepareContainer without a path = %q, %v; want no termination log", p.TerminationLog, err)
	}
	if _, err := os.Stat(TerminationLogPath(in.PodDir, "app", 3)); !os.IsNotExist(err) {
		t.Errorf("termination log without a path: %v, want none created", err)
	}
}

func TestMountUnknownVolume(t *testing.T) {
	pod := podtest.Pod("web")
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "ghost", MountPath: "/x"}}
	_, err := PrepareContainer(prepared(t, pod))
	if !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), `volume "ghost": the pod has no such volume`) {
		t.Errorf("PrepareContainer = %v, want %v for volume ghost", err, runner.ErrCreateConfig)
	}
}
