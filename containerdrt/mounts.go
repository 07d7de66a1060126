package containerdrt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/runner"
)

// Bind mount options, as containerd's CRI sets them (WithMounts): every bind is
// recursive, has a propagation and says ro or rw.
const (
	bindType           = "bind"
	bindRecursive      = "rbind"
	propagationPrivate = "rprivate"
	propagationSlave   = "rslave"
	propagationShared  = "rshared"
	optReadOnly        = "ro"
	optReadWrite       = "rw"
	optRecursiveRO     = "rro" // runc >= 1.2; older runcs ignore it and leave a plain ro bind
)

// Paths every container gets from its pod, and the pod's shared /dev/shm.
const (
	etcHostsPath      = "/etc/hosts"
	etcHostnamePath   = "/etc/hostname"
	etcResolvConfPath = "/etc/resolv.conf"
	devShmPath        = "/dev/shm"
	// The sandbox's /dev/shm as containerd's CRI mounts it (setupSandboxFiles).
	shmSource = "shm"
	shmData   = "mode=1777,size=65536k"
	shmFlags  = unix.MS_NOEXEC | unix.MS_NOSUID | unix.MS_NODEV

	containerDirMode   = 0o750 // the kubelet's pod container dir
	terminationLogMode = 0o666 // the kubelet's: a container user other than root writes it
)

// mountOpts mounts the container's volumes and the files the pod gives each of its
// containers: /etc/hosts, /etc/hostname, /etc/resolv.conf and /dev/shm. It creates what
// hostPath volumes of the *OrCreate types and missing subPaths need, and the pod's
// /dev/shm; preparePod has made the rest of the pod dir. Errors that come from the
// manifest meeting this host wrap runner.ErrCreateConfig.
//
// The termination-message file needs the container's attempt, which specInput does not
// carry yet: see terminationMount.
func mountOpts(in specInput) ([]oci.SpecOpts, error) {
	var mounts []specs.Mount
	for i, vm := range in.Container.VolumeMounts {
		m, err := volumeMount(in, i, vm)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, m)
	}
	managed, err := managedMounts(in, mounts)
	if err != nil {
		return nil, err
	}
	return []oci.SpecOpts{withMounts(append(mounts, managed...))}, nil
}

// configError reports a volume the container cannot mount on this host.
func configError(in specInput, volume string, err error) error {
	return fmt.Errorf("%w: container %q: volume %q: %w", runner.ErrCreateConfig, in.Container.Name, volume, err)
}

// volumeMount is the bind mount of the container's volumeMount at index. A subPath
// that cannot be mounted is reported in the kubelet's words.
func volumeMount(in specInput, index int, vm corev1.VolumeMount) (specs.Mount, error) {
	m, err := bindVolume(in, index, vm)
	var sub *subPathError
	switch {
	case errors.As(err, &sub):
		return specs.Mount{}, fmt.Errorf("%w: %w", runner.ErrCreateConfig, err)
	case err != nil:
		return specs.Mount{}, configError(in, vm.Name, err)
	}
	return m, nil
}

// bindVolume is the bind mount of one volumeMount, with the host side prepared.
func bindVolume(in specInput, index int, vm corev1.VolumeMount) (specs.Mount, error) {
	i := slices.IndexFunc(in.Pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
	if i < 0 {
		return specs.Mount{}, errors.New("the pod has no such volume")
	}
	src, readOnly, err := volumeSource(in.PodDir, &in.Pod.Spec.Volumes[i])
	if err != nil {
		return specs.Mount{}, err
	}
	if src, err = mountSource(in, index, vm, src); err != nil {
		return specs.Mount{}, err
	}
	propagation, err := mountPropagation(in.Container, vm)
	if err != nil {
		return specs.Mount{}, err
	}
	if err := checkPropagationSource(src, propagation); err != nil {
		return specs.Mount{}, err
	}
	opts := []string{bindRecursive, propagation, rwOption(vm.ReadOnly || readOnly)}
	if vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == corev1.RecursiveReadOnlyEnabled {
		// IfPossible stays a plain ro bind: runc 1.1 cannot tell whether it could do more.
		opts = append(opts, optRecursiveRO)
	}
	return specs.Mount{Destination: vm.MountPath, Type: bindType, Source: src, Options: opts}, nil
}

// volumeSource is the host path of a volume, and whether it is read-only whatever the
// mount says (downwardAPI, configMap, secret and projected volumes are, as on a
// kubelet).
func volumeSource(podDir string, vol *corev1.Volume) (string, bool, error) {
	switch {
	case vol.HostPath != nil:
		path, err := prepareHostPath(vol.HostPath)
		return path, false, err
	case vol.EmptyDir != nil:
		return volumeDir(podDir, vol.Name), false, nil
	case vol.DownwardAPI != nil, readsObjects(vol):
		return volumeDir(podDir, vol.Name), true, nil
	}
	return "", false, errors.New("unsupported volume source")
}

// mountSource resolves the bind source: the mount point of the volume's subPath (or
// expanded subPathExpr) in the pod's dir (prepareSubPath), or the volume itself with
// its symlinks resolved, as containerd's CRI resolves every bind source.
func mountSource(in specInput, index int, vm corev1.VolumeMount, src string) (string, error) {
	sub := vm.SubPath
	if vm.SubPathExpr != "" {
		env, err := containerEnv(in)
		if err != nil {
			return "", err
		}
		if sub, err = expandSubPathExpr(vm.SubPathExpr, env.lookup); err != nil {
			return "", err
		}
	}
	if sub != "" {
		target, err := prepareSubPath(in.PodDir, vm.Name, in.Container.Name, index, src, sub)
		if err != nil {
			return "", &subPathError{volume: vm.Name, container: in.Container.Name, err: err}
		}
		return target, nil
	}
	resolved, err := filepath.EvalSymlinks(src)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", src, err)
	}
	return resolved, nil
}

// mountPropagation maps mountPropagation as the kubelet's translateMountPropagation and
// containerd's CRI do. Bidirectional reaches into the host's mounts: privileged only.
func mountPropagation(c *corev1.Container, vm corev1.VolumeMount) (string, error) {
	if vm.MountPropagation == nil {
		return propagationPrivate, nil
	}
	switch *vm.MountPropagation {
	case corev1.MountPropagationNone:
		return propagationPrivate, nil
	case corev1.MountPropagationHostToContainer:
		return propagationSlave, nil
	case corev1.MountPropagationBidirectional:
		if !isPrivileged(c) {
			return "", errors.New("mount propagation Bidirectional needs a privileged container")
		}
		return propagationShared, nil
	}
	return "", fmt.Errorf("unknown mountPropagation %q", *vm.MountPropagation)
}

func rwOption(readOnly bool) string {
	if readOnly {
		return optReadOnly
	}
	return optReadWrite
}

func bindMount(src, dst string, readOnly bool) specs.Mount {
	return specs.Mount{Destination: dst, Type: bindType, Source: src, Options: []string{bindRecursive, propagationPrivate, rwOption(readOnly)}}
}

// managedMounts are the pod's /etc files and /dev/shm, each left out when the container
// mounts a volume at its path itself (the kubelet's makeMounts, containerd's CRI
// isInCRIMounts). /etc/hosts is read-write as the kubelet mounts it; /etc/hostname and
// /etc/resolv.conf are read-only with a read-only root filesystem, as the CRI mounts them.
func managedMounts(in specInput, user []specs.Mount) ([]specs.Mount, error) {
	taken := map[string]bool{}
	for _, m := range user {
		taken[filepath.Clean(m.Destination)] = true
	}
	sc := in.Container.SecurityContext
	roRoot := sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	var out []specs.Mount
	for _, f := range []struct {
		dst, file string
		readOnly  bool
	}{{etcHostsPath, etcHostsFile, false}, {etcHostnamePath, hostnameFile, roRoot}, {etcResolvConfPath, resolvConfFile, roRoot}} {
		if taken[f.dst] {
			continue
		}
		src := filepath.Join(in.PodDir, f.file)
		if _, err := os.Stat(src); err != nil {
			return nil, fmt.Errorf("mount %s: %w", f.dst, err)
		}
		out = append(out, bindMount(src, f.dst, f.readOnly))
	}
	term, err := terminationMount(in, in.Attempt)
	if err != nil {
		return nil, err
	}
	if term != nil {
		out = append(out, *term)
	}
	if taken[devShmPath] {
		return out, nil
	}
	shm, err := shmMount(in)
	if err != nil || shm == nil {
		return out, err
	}
	return append(out, *shm), nil
}

// shmMount is the container's /dev/shm: the host's with hostIPC; the pod's, shared by
// all its containers, when they join a sandbox's IPC namespace (POSIX shared memory
// lives in /dev/shm, so sharing the IPC namespace alone would not share it); otherwise
// none, which keeps the private 64 MiB tmpfs of containerd's default spec.
func shmMount(in specInput) (*specs.Mount, error) {
	switch {
	case in.Pod.Spec.HostIPC:
		m := bindMount(devShmPath, devShmPath, false)
		return &m, nil
	case in.SandboxNS == "" || in.Pod.Spec.HostNetwork:
		return nil, nil // the namespace rules of namespaceOpts: no shared IPC namespace
	}
	dir := filepath.Join(in.PodDir, shmDir)
	if err := os.MkdirAll(dir, podDirMode); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	if err := ensureTmpfs(dir, shmSource, shmFlags, shmData); err != nil {
		return nil, err
	}
	m := bindMount(dir, devShmPath, false)
	return &m, nil
}

// terminationMount creates the host file of the container's termination message for
// attempt (empty, mode 0666 whatever the umask, as the kubelet's kuberuntime does) and
// returns its bind at terminationMessagePath, or nil when the path is empty or the
// container mounts a volume there.
func terminationMount(in specInput, attempt int) (*specs.Mount, error) {
	dst := in.Container.TerminationMessagePath
	if dst == "" || slices.ContainsFunc(in.Container.VolumeMounts, func(vm corev1.VolumeMount) bool {
		return filepath.Clean(vm.MountPath) == filepath.Clean(dst)
	}) {
		return nil, nil
	}
	path := terminationLogPath(in.PodDir, in.Container.Name, attempt)
	if err := os.MkdirAll(filepath.Dir(path), containerDirMode); err != nil {
		return nil, fmt.Errorf("create termination log dir: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create termination log: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("create termination log: %w", err)
	}
	if err := os.Chmod(path, terminationLogMode); err != nil {
		return nil, fmt.Errorf("chmod termination log: %w", err)
	}
	m := bindMount(path, dst, false)
	return &m, nil
}

// withMounts adds mounts to the spec the way containerd's CRI does (WithMounts): a
// default mount at a path one of them takes is dropped (and everything under /dev when
// they take /dev); they follow the defaults sorted by depth of destination, so that a
// parent is mounted before its children; and the root's propagation becomes rshared
// or rslave when a mount needs it to propagate.
func withMounts(mounts []specs.Mount) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		taken := map[string]bool{}
		for _, m := range mounts {
			taken[filepath.Clean(m.Destination)] = true
		}
		kept := slices.DeleteFunc(slices.Clone(s.Mounts), func(m specs.Mount) bool {
			dst := filepath.Clean(m.Destination)
			return taken[dst] || taken["/dev"] && strings.HasPrefix(dst, "/dev/")
		})
		sorted := slices.Clone(mounts)
		slices.SortStableFunc(sorted, func(a, b specs.Mount) int { return depth(a.Destination) - depth(b.Destination) })
		s.Mounts = append(kept, sorted...)
		if prop := rootfsPropagation(mounts); prop != "" {
			if s.Linux == nil {
				s.Linux = &specs.Linux{}
			}
			if s.Linux.RootfsPropagation != propagationShared {
				s.Linux.RootfsPropagation = prop
			}
		}
		return nil
	}
}

func depth(path string) int { return strings.Count(filepath.Clean(path), "/") }

// rootfsPropagation is the propagation the container's root needs for its mounts to
// propagate: rshared for a Bidirectional mount, rslave for a HostToContainer one.
func rootfsPropagation(mounts []specs.Mount) string {
	prop := ""
	for _, m := range mounts {
		switch {
		case slices.Contains(m.Options, propagationShared):
			return propagationShared
		case slices.Contains(m.Options, propagationSlave):
			prop = propagationSlave
		}
	}
	return prop
}

// formatMap formats labels or annotations for a downwardAPI file as the kubelet does
// (pkg/fieldpath FormatMap): key="value" lines sorted by key, values Go-quoted, no
// final newline.
func formatMap(m map[string]string) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lines = append(lines, k+"="+strconv.Quote(m[k]))
	}
	return strings.Join(lines, "\n")
}

// writeDownwardAPI writes the files of a downwardAPI volume into dir, each replaced
// atomically so that a container reading it never sees a part, with the item's mode or
// the volume's default mode.
func writeDownwardAPI(in specInput, src *corev1.DownwardAPIVolumeSource, dir string) error {
	if err := os.MkdirAll(dir, downwardDirMode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, item := range src.Items {
		value, err := downwardValue(in, item)
		if err != nil {
			return fmt.Errorf("%w: file %s: %w", runner.ErrCreateConfig, item.Path, err)
		}
		mode := fs.FileMode(corev1.DownwardAPIVolumeSourceDefaultMode)
		if m := cmp.Or(item.Mode, src.DefaultMode); m != nil {
			mode = fs.FileMode(*m)
		}
		path := filepath.Join(dir, item.Path)
		if err := os.MkdirAll(filepath.Dir(path), downwardDirMode); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
		}
		if err := writeFileAtomic(path, []byte(value), mode); err != nil {
			return err
		}
	}
	return nil
}

// downwardValue is the content of a downwardAPI file: labels and annotations as whole
// maps, which environment variables cannot hold, or the value an environment variable
// would get.
func downwardValue(in specInput, item corev1.DownwardAPIVolumeFile) (string, error) {
	switch {
	case item.FieldRef != nil && item.FieldRef.FieldPath == "metadata.labels":
		return formatMap(in.Pod.Labels), nil
	case item.FieldRef != nil && item.FieldRef.FieldPath == "metadata.annotations":
		return formatMap(in.Pod.Annotations), nil
	case item.FieldRef != nil:
		return fieldRefValue(in, item.FieldRef)
	case item.ResourceFieldRef != nil:
		return resourceFieldRefValue(in, item.ResourceFieldRef)
	}
	return "", errors.New("neither fieldRef nor resourceFieldRef is set")
}
