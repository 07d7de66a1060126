package spec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cap"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/runner"
)

// specUsersRootfs is an image root with users and groups: app (1000, group 1001) is a
// member of wheel and audio, root of other.
func specUsersRootfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
		"etc/group":  "root:x:0:\nwheel:x:10:app\naudio:x:29:nobody,app\nother:x:50:root\napp:x:1001:app\nnogroup:x:65534:\n",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func mustSecuritySpec(t *testing.T, in Input) *specs.Spec {
	t.Helper()
	opts, err := Security(in)
	if err != nil {
		t.Fatalf("Security: %v", err)
	}
	return specFromOpts(t, specUsersRootfs(t), opts)
}

func specContainerSC(in Input) *corev1.SecurityContext {
	if in.Container.SecurityContext == nil {
		in.Container.SecurityContext = &corev1.SecurityContext{}
	}
	return in.Container.SecurityContext
}

func specPodSC(in Input) *corev1.PodSecurityContext {
	if in.Pod.Spec.SecurityContext == nil {
		in.Pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	return in.Pod.Spec.SecurityContext
}

func TestSecurityUser(t *testing.T) {
	for _, tc := range []struct {
		name      string
		imageUser string
		edit      func(Input)
		uid, gid  uint32
		groups    []uint32
	}{
		{name: "no USER: root", uid: 0, gid: 0, groups: []uint32{0, 50}},
		{name: "USER name", imageUser: "app", uid: 1000, gid: 1001, groups: []uint32{10, 29, 1001}},
		{name: "USER uid:gid", imageUser: "1000:2000", uid: 1000, gid: 2000, groups: []uint32{10, 29, 2000}},
		{name: "runAsUser: gid from passwd", imageUser: "nobody", edit: func(in Input) { specContainerSC(in).RunAsUser = new(int64(1000)) },
			uid: 1000, gid: 1001, groups: []uint32{10, 29, 1001}},
		{name: "runAsUser unknown to passwd: gid 0", edit: func(in Input) { specContainerSC(in).RunAsUser = new(int64(4242)) },
			uid: 4242, gid: 0, groups: []uint32{0}},
		{name: "runAsUser and runAsGroup", edit: func(in Input) {
			specContainerSC(in).RunAsUser, specContainerSC(in).RunAsGroup = new(int64(1000)), new(int64(3000))
		}, uid: 1000, gid: 3000, groups: []uint32{10, 29, 3000}},
		{name: "runAsGroup with image user", imageUser: "app", edit: func(in Input) { specContainerSC(in).RunAsGroup = new(int64(3000)) },
			uid: 1000, gid: 3000, groups: []uint32{10, 29, 3000}},
		{name: "runAsGroup without image user", edit: func(in Input) { specPodSC(in).RunAsGroup = new(int64(3000)) },
			uid: 0, gid: 3000, groups: []uint32{50, 3000}},
		{name: "pod fallback, container wins", edit: func(in Input) {
			specPodSC(in).RunAsUser, specPodSC(in).RunAsGroup = new(int64(1)), new(int64(2))
			specContainerSC(in).RunAsUser = new(int64(1000))
		}, uid: 1000, gid: 2, groups: []uint32{2, 10, 29}},
		{name: "fsGroup and supplementalGroups merged", edit: func(in Input) {
			specContainerSC(in).RunAsUser = new(int64(1000))
			specPodSC(in).FSGroup = new(int64(2000))
			specPodSC(in).SupplementalGroups = []int64{4000, 10}
		}, uid: 1000, gid: 1001, groups: []uint32{10, 29, 1001, 2000, 4000}},
		{name: "Strict: no groups from the image", edit: func(in Input) {
			specContainerSC(in).RunAsUser = new(int64(1000))
			specPodSC(in).SupplementalGroups = []int64{4000}
			specPodSC(in).SupplementalGroupsPolicy = new(corev1.SupplementalGroupsPolicyStrict)
		}, uid: 1000, gid: 1001, groups: []uint32{1001, 4000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{User: tc.imageUser})
			if tc.edit != nil {
				tc.edit(in)
			}
			want := []any{tc.uid, tc.gid, tc.groups}
			u := mustSecuritySpec(t, in).Process.User
			if diff := cmp.Diff(want, []any{u.UID, u.GID, u.AdditionalGids}); diff != "" {
				t.Errorf("from the root (-want +got):\n%s", diff)
			}
			// The same from a copy of the image's user files, for a container with a
			// snapshot: nothing is mounted (there is no client to ask for its mounts),
			// and the spec's root is left as it was.
			in.ImageUserFiles = specUsersRootfs(t)
			s := mustSecuritySpecOfSnapshot(t, in)
			if u := s.Process.User; !cmp.Equal(want, []any{u.UID, u.GID, u.AdditionalGids}) {
				t.Errorf("from the user files: uid, gid, groups = %v %v %v, want %v", u.UID, u.GID, u.AdditionalGids, want)
			}
			if s.Root.Path != "rootfs" {
				t.Errorf("root path %q after the lookups, want containerd's default rootfs", s.Root.Path)
			}
		})
	}
}

// mustSecuritySpecOfSnapshot applies Security's options to containerd's default spec
// for a container whose root is a snapshot, with no client: an option that asked
// containerd for the snapshot's mounts would fail.
func mustSecuritySpecOfSnapshot(t *testing.T, in Input) *specs.Spec {
	t.Helper()
	opts, err := Security(in)
	if err != nil {
		t.Fatalf("Security: %v", err)
	}
	ctx := namespaces.WithNamespace(context.Background(), "spec-test")
	c := &containers.Container{ID: "spec-test", Snapshotter: "overlayfs", SnapshotKey: "spec-test"}
	s, err := oci.GenerateSpec(ctx, nil, c)
	if err != nil {
		t.Fatalf("generate default spec: %v", err)
	}
	for _, o := range opts {
		if err := callOpt(ctx, o, c, s); err != nil {
			t.Fatalf("apply spec option: %v", err)
		}
	}
	return s
}

// callOpt applies o with no client, turning the panic of an option that uses one into
// an error.
func callOpt(ctx context.Context, o oci.SpecOpts, c *containers.Container, s *specs.Spec) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the option used containerd's client: %v", p)
		}
	}()
	return o(ctx, nil, c, s)
}

func TestSecurityRunAsNonRoot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		imageUser string
		runAsUser *int64
		onPod     bool
		wantErr   string // "" when allowed
	}{
		{name: "no USER is root", wantErr: "image runs as root (no USER)"},
		{name: "USER 0", imageUser: "0", wantErr: "image runs as root (uid 0)"},
		{name: "USER 0:0", imageUser: "0:0", wantErr: "image runs as root (uid 0)"},
		{name: "USER root", imageUser: "root", wantErr: "image has non-numeric user (root), cannot verify user is non-root"},
		{name: "USER app", imageUser: "app:app", wantErr: "image has non-numeric user (app), cannot verify user is non-root"},
		{name: "runAsUser 0", imageUser: "1000", runAsUser: new(int64(0)), wantErr: "securityContext.runAsUser is 0"},
		{name: "USER 1000:1000", imageUser: "1000:1000"},
		{name: "runAsUser over a root image", imageUser: "root", runAsUser: new(int64(1000))},
		{name: "set on the pod", imageUser: "", onPod: true, wantErr: "image runs as root (no USER)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{User: tc.imageUser})
			specContainerSC(in).RunAsUser = tc.runAsUser
			if tc.onPod {
				specPodSC(in).RunAsNonRoot = new(true)
			} else {
				specContainerSC(in).RunAsNonRoot = new(true)
			}
			_, err := Security(in)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Security = %v, want it allowed", err)
			case tc.wantErr != "" && (!errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), `container "app"`)):
				t.Errorf("Security = %v, want ErrCreateConfig naming the container and saying %q", err, tc.wantErr)
			}
		})
	}
	in := specTestInput(ocispec.ImageConfig{})
	specContainerSC(in).RunAsNonRoot = new(false)
	if _, err := Security(in); err != nil {
		t.Errorf("Security with runAsNonRoot false over a root image = %v, want nil", err)
	}
}

func specCapSet(s *specs.Spec) []string {
	c := s.Process.Capabilities
	if !slices.Equal(c.Bounding, c.Effective) || !slices.Equal(c.Bounding, c.Permitted) {
		return []string{"sets differ", strings.Join(c.Bounding, ","), strings.Join(c.Effective, ","), strings.Join(c.Permitted, ",")}
	}
	return slices.Sorted(slices.Values(c.Effective))
}

func TestSecurityCapabilities(t *testing.T) {
	defaults := specCapSet(specFromOpts(t, "", nil))
	current, err := cap.Current()
	if err != nil {
		t.Fatal(err)
	}
	without := func(list []string, drop ...string) []string {
		return slices.DeleteFunc(slices.Clone(list), func(c string) bool { return slices.Contains(drop, c) })
	}
	with := func(list []string, add ...string) []string {
		return slices.Sorted(slices.Values(append(slices.Clone(list), add...)))
	}
	for _, tc := range []struct {
		name      string
		add, drop []corev1.Capability
		want      []string
	}{
		{name: "unchanged", want: defaults},
		{name: "add and drop", add: []corev1.Capability{"NET_ADMIN"}, drop: []corev1.Capability{"CHOWN"},
			want: with(without(defaults, "CAP_CHOWN"), "CAP_NET_ADMIN")},
		{name: "CAP_ prefix, any case", add: []corev1.Capability{"cap_net_admin", "Sys_Time"}, drop: []corev1.Capability{"CAP_KILL"},
			want: with(without(defaults, "CAP_KILL"), "CAP_NET_ADMIN", "CAP_SYS_TIME")},
		{name: "drop ALL, add one", add: []corev1.Capability{"NET_BIND_SERVICE"}, drop: []corev1.Capability{"ALL"},
			want: []string{"CAP_NET_BIND_SERVICE"}},
		{name: "add ALL, drop one", add: []corev1.Capability{"all"}, drop: []corev1.Capability{"CHOWN"},
			want: slices.Sorted(slices.Values(without(current, "CAP_CHOWN")))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{})
			specContainerSC(in).Capabilities = &corev1.Capabilities{Add: tc.add, Drop: tc.drop}
			if diff := cmp.Diff(tc.want, specCapSet(mustSecuritySpec(t, in))); diff != "" {
				t.Errorf("capabilities (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecurityCapabilitiesRefused(t *testing.T) {
	held := func() ([]string, error) { return []string{"CAP_CHOWN", "CAP_NET_ADMIN"}, nil }
	for name, caps := range map[string]*corev1.Capabilities{
		"unknown name":         {Add: []corev1.Capability{"FLY"}},
		"unknown name to drop": {Drop: []corev1.Capability{"CAP_FLY"}},
		"not held":             {Add: []corev1.Capability{"NET_ADMIN", "SYS_RESOURCE"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := capabilityOpts("app", caps, held)
			if !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), `container "app": securityContext.capabilities`) {
				t.Errorf("capabilityOpts = %v, want ErrCreateConfig naming container and field", err)
			}
		})
	}
	if _, err := capabilityOpts("app", &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"SYS_RESOURCE"}}, held); err != nil {
		t.Errorf("capabilityOpts adding a held capability = %v, want nil", err)
	}
}

func TestSecurityPrivileged(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{})
	specContainerSC(in).Privileged = new(true)
	specContainerSC(in).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	s := mustSecuritySpec(t, in)
	current, err := cap.Current()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(current)), specCapSet(s)); diff != "" {
		t.Errorf("privileged capabilities (-staticpod's +got):\n%s", diff)
	}
	if s.Linux.MaskedPaths != nil || s.Linux.ReadonlyPaths != nil || s.Linux.Seccomp != nil {
		t.Errorf("masked, read-only paths, seccomp = %v, %v, %v; want none", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths, s.Linux.Seccomp)
	}
	for _, m := range s.Mounts {
		if (m.Type == "sysfs" || m.Type == "cgroup") && slices.Contains(m.Options, "ro") {
			t.Errorf("mount %s options %v: want it writable", m.Destination, m.Options)
		}
	}
	if want := []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}; !cmp.Equal(want, s.Linux.Resources.Devices) {
		t.Errorf("device cgroup = %+v, want all allowed", s.Linux.Resources.Devices)
	}
	if len(s.Linux.Devices) == 0 {
		t.Error("no host devices in a privileged spec")
	}
}

func TestSecurityNoNewPrivilegesAndReadOnlyRoot(t *testing.T) {
	for _, tc := range []struct {
		name       string
		escalation *bool
		readOnly   *bool
		wantNNP    bool
		wantRO     bool
	}{
		{name: "defaults: escalation allowed, writable root"},
		{name: "allowPrivilegeEscalation true", escalation: new(true)},
		{name: "allowPrivilegeEscalation false", escalation: new(false), wantNNP: true},
		{name: "readOnlyRootFilesystem", readOnly: new(true), wantRO: true},
		{name: "readOnlyRootFilesystem false", readOnly: new(false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{})
			specContainerSC(in).AllowPrivilegeEscalation, specContainerSC(in).ReadOnlyRootFilesystem = tc.escalation, tc.readOnly
			s := mustSecuritySpec(t, in)
			if s.Process.NoNewPrivileges != tc.wantNNP || s.Root.Readonly != tc.wantRO {
				t.Errorf("noNewPrivileges, readonly root = %v, %v; want %v, %v", s.Process.NoNewPrivileges, s.Root.Readonly, tc.wantNNP, tc.wantRO)
			}
		})
	}
}

func TestSecuritySeccomp(t *testing.T) {
	dir := t.TempDir()
	profile := `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`
	podtest.WriteFile(t, filepath.Join(dir, "profiles", "no-mkdir.json"), profile)
	wantLocal := &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{{Names: []string{"mkdir", "mkdirat"}, Action: specs.ActErrno}}}
	runtimeDefault := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	unconfined := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	for _, tc := range []struct {
		name           string
		container, pod *corev1.SeccompProfile
		privileged     bool
		want           func(*specs.LinuxSeccomp) bool
	}{
		{name: "unset: unconfined", want: isUnconfined},
		{name: "Unconfined", container: unconfined, want: isUnconfined},
		{name: "RuntimeDefault", container: runtimeDefault, want: isRuntimeDefaultProfile},
		{name: "from the pod", pod: runtimeDefault, want: isRuntimeDefaultProfile},
		{name: "container over pod", container: unconfined, pod: runtimeDefault, want: isUnconfined},
		{name: "privileged is unconfined", container: runtimeDefault, privileged: true, want: isUnconfined},
		{name: "Localhost", container: podtest.LocalhostSeccomp("profiles/no-mkdir.json"),
			want: func(sp *specs.LinuxSeccomp) bool { return cmp.Equal(wantLocal, sp) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{})
			in.SeccompDir = dir
			specContainerSC(in).SeccompProfile = tc.container
			specContainerSC(in).Privileged = &tc.privileged
			specPodSC(in).SeccompProfile = tc.pod
			if got := mustSecuritySpec(t, in).Linux.Seccomp; !tc.want(got) {
				t.Errorf("seccomp = %+v", got)
			}
		})
	}
}

func isUnconfined(sp *specs.LinuxSeccomp) bool { return sp == nil }

func isRuntimeDefaultProfile(sp *specs.LinuxSeccomp) bool {
	return sp != nil && sp.DefaultAction == specs.ActErrno && len(sp.Syscalls) > 0
}

func TestSecuritySeccompLocalhostRefused(t *testing.T) {
	outside := t.TempDir()
	podtest.WriteFile(t, filepath.Join(outside, "p.json"), `{"defaultAction":"SCMP_ACT_ALLOW"}`)
	dir := t.TempDir()
	podtest.WriteFile(t, filepath.Join(dir, "bad.json"), `{"defaultAction":`)
	if err := os.Symlink(filepath.Join(outside, "p.json"), filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, dir, profile, want string }{
		{"escapes", dir, "../p.json", "must be a relative path inside"},
		{"absolute", dir, filepath.Join(outside, "p.json"), "must be a relative path inside"},
		{"symlink out", dir, "link.json", "link.json"},
		{"missing", dir, "none.json", "none.json"},
		{"not JSON", dir, "bad.json", "decode"},
		{"no directory", "", "p.json", "no seccomp profile directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{})
			in.SeccompDir = tc.dir
			specContainerSC(in).SeccompProfile = podtest.LocalhostSeccomp(tc.profile)
			_, err := Security(in)
			if !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), `container "app": seccompProfile`) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Security = %v, want ErrCreateConfig naming container, field and %q", err, tc.want)
			}
		})
	}
}
