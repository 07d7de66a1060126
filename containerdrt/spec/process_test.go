package spec

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/runner"
)

// specTestInput is a defaulted pod "web" with one container "app" running image, with
// what the pod directory's preparation would give it: spec building only names the
// paths, so they need not exist.
func specTestInput(image ocispec.ImageConfig) Input {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-node1", Namespace: "prod", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"example.com/owner": "ops"},
		},
		Spec: corev1.PodSpec{
			NodeName:           "node1",
			ServiceAccountName: "default",
			Containers:         []corev1.Container{{Name: "app", Image: "busybox"}},
		},
	}
	return Input{
		Pod: pod, Container: &pod.Spec.Containers[0], Image: image,
		PodIP: "10.0.0.7", HostIP: "192.168.1.2",
		Prepared: Prepared{
			Hostname: "web-node1",
			EtcHosts: "/pods/uid-1/etc-hosts", EtcHostname: "/pods/uid-1/hostname", ResolvConf: "/pods/uid-1/resolv.conf",
		},
	}
}

// specFromOpts applies opts to containerd's default spec for a container whose root
// filesystem is the directory root (empty for options that read no files).
func specFromOpts(t *testing.T, root string, opts []oci.SpecOpts) *oci.Spec {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), "spec-test")
	c := &containers.Container{ID: "spec-test"}
	s, err := oci.GenerateSpec(ctx, nil, c)
	if err != nil {
		t.Fatalf("generate default spec: %v", err)
	}
	if root != "" {
		s.Root.Path = root
	}
	for _, o := range opts {
		if err := o(ctx, nil, c, s); err != nil {
			t.Fatalf("apply spec option: %v", err)
		}
	}
	return s
}

func mustProcessSpec(t *testing.T, in Input) *oci.Spec {
	t.Helper()
	opts, err := Process(in)
	if err != nil {
		t.Fatalf("Process: %v", err)
	}
	return specFromOpts(t, "", opts)
}

func TestProcessArgs(t *testing.T) {
	image := ocispec.ImageConfig{Entrypoint: []string{"/ep", "-x"}, Cmd: []string{"cmd1", "cmd2"}}
	for _, tc := range []struct {
		name          string
		command, args []string
		image         ocispec.ImageConfig
		want          []string
	}{
		{"neither: ENTRYPOINT+CMD", nil, nil, image, []string{"/ep", "-x", "cmd1", "cmd2"}},
		{"command only: CMD dropped", []string{"/bin/run"}, nil, image, []string{"/bin/run"}},
		{"args only: ENTRYPOINT+args", nil, []string{"a1"}, image, []string{"/ep", "-x", "a1"}},
		{"both", []string{"/bin/run"}, []string{"a1", "a2"}, image, []string{"/bin/run", "a1", "a2"}},
		{"no ENTRYPOINT: CMD", nil, nil, ocispec.ImageConfig{Cmd: []string{"sh"}}, []string{"sh"}},
		{"args without ENTRYPOINT", nil, []string{"echo", "hi"}, ocispec.ImageConfig{Cmd: []string{"sh"}}, []string{"echo", "hi"}},
		{`ENTRYPOINT [""] is none`, nil, nil, ocispec.ImageConfig{Entrypoint: []string{""}, Cmd: []string{"sh"}}, []string{"sh"}},
		{"expanded", []string{"$(A)", "$$(A)", "$(UNSET)", "x$(B)y"}, []string{"$(A)$(A)"}, image,
			[]string{"1", "$(A)", "$(UNSET)", "x1-2y", "11"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := specTestInput(tc.image)
			in.Container.Command, in.Container.Args = tc.command, tc.args
			in.Container.Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "$(A)-2"}}
			got := mustProcessSpec(t, in).Process.Args
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProcessArgsEmptyRefused(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{})
	_, err := Process(in)
	if !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), `container "app"`) {
		t.Errorf("Process with no command anywhere = %v, want ErrCreateConfig naming the container", err)
	}
}

// TestExpandEnvRefs runs the kubelet's own expansion cases
// (third_party/forked/golang/expansion/expand_test.go).
func TestExpandEnvRefs(t *testing.T) {
	vars := map[string]string{"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}
	lookup := func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
	for in, want := range map[string]string{
		"$(VAR_A)":                   "A",
		"$(VAR_A)-$(VAR_A)":          "A-A",
		"___$(VAR_B)___":             "___B___",
		"$(VAR_A)_$(VAR_B)_$(VAR_C)": "A_B_C",
		"$$(VAR_B)_$(VAR_A)":         "$(VAR_B)_A",
		"$$(VAR_A)_$$(VAR_B)":        "$(VAR_A)_$(VAR_B)",
		"f000-$$VAR_A":               "f000-$VAR_A",
		`foo\$(VAR_C)bar`:            `foo\Cbar`,
		"$(VAR_A$(VAR_B))":           "$(VAR_A$(VAR_B))",
		"$(VAR_A$(VAR_B)":            "$(VAR_A$(VAR_B)",
		"$(VAR_REF)":                 "$(VAR_A)",
		"foo$(VAR_EMPTY)bar":         "foobar",
		"foo$(VAR_Awhoops!":          "foo$(VAR_Awhoops!",
		"$?_boo_$!":                  "$?_boo_$!",
		"$VAR_A":                     "$VAR_A",
		"$(VAR_DNE)":                 "$(VAR_DNE)",
		"$$$$$$(BIG_MONEY)":          "$$$(BIG_MONEY)",
		"$$$$$$(VAR_A)":              "$$$(VAR_A)",
		"$$$$$$$(GOOD_ODDS)":         "$$$$(GOOD_ODDS)",
		"$$$$$$$(VAR_A)":             "$$$A",
		"$VAR_A)":                    "$VAR_A)",
		"${VAR_A}":                   "${VAR_A}",
		"$(VAR_B)_______$(A":         "B_______$(A",
		"$(VAR_C)_______$(":          "C_______$(",
		"$(VAR_A)foobarzab$":         "Afoobarzab$",
		"--$($($($($--":              "--$($($($($--",
		"$($($($($--foo$(":           "$($($($($--foo$(",
		"$(foo$$var)":                "$(foo$$var)",
		"\n":                         "\n",
		"$()":                        "$()",
	} {
		if got := expandEnvRefs(in, lookup); got != want {
			t.Errorf("expandEnvRefs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProcessEnv(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{
		Cmd: []string{"sh"},
		Env: []string{"PATH=/image/bin", "IMG=1", "SHARED=image"},
	})
	in.Container.Env = []corev1.EnvVar{
		{Name: "SHARED", Value: "pod"},
		{Name: "A", Value: "x"},
		{Name: "B", Value: "$(A)-y"},        // an earlier variable
		{Name: "C", Value: "$(IMG)"},        // the image's are not visible, as in the kubelet
		{Name: "D", Value: "$(LATER)"},      // nor later ones
		{Name: "E", Value: "$$(A) $(A$(A)"}, // escaped; unclosed nested
		{Name: "LATER", Value: "z"},
		{Name: "A", Value: "$(A)$(A)"}, // redeclared: its earlier value, same place
		{Name: "EMPTY"},
	}
	want := []string{
		"PATH=/image/bin", "HOSTNAME=web-node1", "IMG=1", "SHARED=pod",
		"A=xx", "B=x-y", "C=$(IMG)", "D=$(LATER)", "E=$(A) $(A$(A)", "LATER=z", "EMPTY=",
	}
	if diff := cmp.Diff(want, mustProcessSpec(t, in).Process.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestDownwardEnv(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{Cmd: []string{"sh"}})
	in.Container.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("100M")},
	}
	in.Pod.Spec.Containers = append(in.Pod.Spec.Containers, corev1.Container{Name: "side"})
	in.Container = &in.Pod.Spec.Containers[0]
	in.PodDir = t.TempDir()
	in.Container.Env = []corev1.EnvVar{
		podtest.FieldEnv("NAME", "metadata.name"), podtest.FieldEnv("NS", "metadata.namespace"), podtest.FieldEnv("UID", "metadata.uid"),
		podtest.FieldEnv("LABEL", "metadata.labels['app']"), podtest.FieldEnv("NOLABEL", "metadata.labels['none']"),
		podtest.FieldEnv("ANNOTATION", "metadata.annotations['example.com/owner']"),
		podtest.FieldEnv("NODE", "spec.nodeName"), podtest.FieldEnv("SA", "spec.serviceAccountName"),
		podtest.FieldEnv("HOST_IP", "status.hostIP"), podtest.FieldEnv("HOST_IPS", "status.hostIPs"),
		podtest.FieldEnv("POD_IP", "status.podIP"), podtest.FieldEnv("POD_IPS", "status.podIPs"),
		podtest.ResourceEnv("CPU_LIMIT", "", "limits.cpu", ""),        // 1.5 rounds up to 2
		podtest.ResourceEnv("CPU_LIMIT_M", "", "limits.cpu", "1m"),    // 1500
		podtest.ResourceEnv("CPU_REQUEST", "app", "requests.cpu", ""), // 0.25 rounds up to 1
		podtest.ResourceEnv("MEM_REQUEST_MI", "", "requests.memory", "1Mi"),
		podtest.ResourceEnv("MEM_LIMIT_MI", "", "limits.memory", "1Mi"), // 100M = 95.4Mi rounds up
		podtest.ResourceEnv("MEM_LIMIT", "", "limits.memory", ""),
		podtest.ResourceEnv("EPH_REQUEST", "", "requests.ephemeral-storage", ""),
		podtest.ResourceEnv("SIDE_CPU", "side", "limits.cpu", "1m"),  // no limit: the host's CPUs
		podtest.ResourceEnv("SIDE_MEM", "side", "limits.memory", ""), // no limit: MemTotal
		{Name: "DERIVED", Value: "$(NAME).$(NS)"},
	}
	mem, err := MemTotal()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"NAME": "web-node1", "NS": "prod", "UID": "uid-1", "LABEL": "web", "NOLABEL": "", "ANNOTATION": "ops",
		"NODE": "node1", "SA": "default", "HOST_IP": "192.168.1.2", "HOST_IPS": "192.168.1.2",
		"POD_IP": "10.0.0.7", "POD_IPS": "10.0.0.7",
		"CPU_LIMIT": "2", "CPU_LIMIT_M": "1500", "CPU_REQUEST": "1", "MEM_REQUEST_MI": "64",
		"MEM_LIMIT_MI": "96", "MEM_LIMIT": "100000000", "EPH_REQUEST": "0",
		"SIDE_CPU": strconv.Itoa(runtime.NumCPU() * 1000), "SIDE_MEM": strconv.FormatInt(mem, 10),
		"DERIVED": "web-node1.prod",
	}
	got := map[string]string{}
	for _, kv := range mustProcessSpec(t, in).Process.Env {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := want[k]; ok {
			got[k] = v
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("downward API env (-want +got):\n%s", diff)
	}
}

func TestDownwardEnvEphemeralStorageDefaultsToFilesystem(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{Cmd: []string{"sh"}})
	in.PodDir = t.TempDir()
	in.Container.Env = []corev1.EnvVar{podtest.ResourceEnv("EPH", "", "limits.ephemeral-storage", "")}
	want, ok := hostAllocatable(in.PodDir)[corev1.ResourceEphemeralStorage]
	if !ok || want.IsZero() {
		t.Fatalf("hostAllocatable(%s) has no ephemeral storage", in.PodDir)
	}
	env := mustProcessSpec(t, in).Process.Env
	if got, want := env[len(env)-1], "EPH="+strconv.FormatInt(want.Value(), 10); got != want {
		t.Errorf("limits.ephemeral-storage without a limit: %q, want %q", got, want)
	}
}

func TestDownwardEnvRefused(t *testing.T) {
	for name, env := range map[string]corev1.EnvVar{
		"unknown field":     podtest.FieldEnv("X", "status.phase"),
		"subscript on name": podtest.FieldEnv("X", "metadata.name['x']"),
		"bad label key":     podtest.FieldEnv("X", "metadata.labels['a b']"),
		"unknown resource":  podtest.ResourceEnv("X", "", "limits.gpu", ""),
		"unknown container": podtest.ResourceEnv("X", "nope", "limits.cpu", ""),
		"configMap":         {Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}},
		"secret":            {Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
	} {
		t.Run(name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{Cmd: []string{"sh"}})
			in.Container.Env = []corev1.EnvVar{env}
			_, err := Process(in)
			if !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), `container "app": env X`) {
				t.Errorf("Process = %v, want ErrCreateConfig naming container and variable", err)
			}
		})
	}
}

func TestProcessWorkingDirTerminalRlimits(t *testing.T) {
	for _, tc := range []struct {
		name             string
		container, image string
		tty, stdin       bool
		wantCwd          string
		wantTerminal     bool
	}{
		{name: "default", wantCwd: "/"},
		{name: "image", image: "/srv", wantCwd: "/srv"},
		{name: "container wins", container: "/work", image: "/srv", wantCwd: "/work"},
		{name: "tty", tty: true, stdin: true, wantCwd: "/", wantTerminal: true},
		{name: "stdin alone", stdin: true, wantCwd: "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := specTestInput(ocispec.ImageConfig{Cmd: []string{"sh"}, WorkingDir: tc.image})
			in.Container.WorkingDir, in.Container.TTY, in.Container.Stdin = tc.container, tc.tty, tc.stdin
			p := mustProcessSpec(t, in).Process
			if p.Cwd != tc.wantCwd || p.Terminal != tc.wantTerminal {
				t.Errorf("cwd, terminal = %q, %v; want %q, %v", p.Cwd, p.Terminal, tc.wantCwd, tc.wantTerminal)
			}
			if len(p.Rlimits) != 0 {
				t.Errorf("rlimits = %v, want none (inherited from the shim)", p.Rlimits)
			}
		})
	}
}

func TestStopSignal(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{})
	if got := StopSignal(in); got != "SIGTERM" {
		t.Errorf("stopSignal without any = %q, want SIGTERM", got)
	}
	in.Image.StopSignal = "SIGQUIT"
	if got := StopSignal(in); got != "SIGQUIT" {
		t.Errorf("stopSignal with image's = %q, want SIGQUIT", got)
	}
	in.Container.Lifecycle = &corev1.Lifecycle{StopSignal: new(corev1.SIGUSR1)}
	if got := StopSignal(in); got != "SIGUSR1" {
		t.Errorf("stopSignal with lifecycle.stopSignal = %q, want SIGUSR1", got)
	}
}
