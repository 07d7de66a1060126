package poddir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/runner"
)

// What a container's preparation makes.
const (
	// devShm is where POSIX shared memory lives, in a container and on the host.
	devShm = "/dev/shm"
	// The sandbox's /dev/shm as containerd's CRI mounts it (setupSandboxFiles).
	shmSource = "shm"
	shmData   = "mode=1777,size=65536k"
	shmFlags  = unix.MS_NOEXEC | unix.MS_NOSUID | unix.MS_NODEV

	containerDirMode   = 0o750 // the kubelet's pod container dir
	terminationLogMode = 0o666 // the kubelet's: a container user other than root writes it
)

// PrepareContainer makes the host side of the container's mounts, in the pod's
// directories that PreparePod made, and returns it for spec.Mounts: the bind source of each
// volumeMount (a hostPath checked, and created for the *OrCreate types; a subPath
// created if missing and bind-mounted in the pod's dir), the pod's /etc files (its
// /etc/hosts written now, naming the pod's IP, as the kubelet writes it), the
// file of this attempt's termination message, created, and the pod's /dev/shm, a
// tmpfs mounted once per pod. It reads the pod's hostname too, for HOSTNAME. Errors
// that come from the manifest meeting this host wrap runner.ErrCreateConfig.
func PrepareContainer(in spec.Input) (spec.Prepared, error) {
	hostname, err := podHostnameFile(in.Pod) // HOSTNAME is what /etc/hostname holds, as on the CRI
	if err != nil {
		return spec.Prepared{}, fmt.Errorf("container %q: %w", in.Container.Name, err)
	}
	p := spec.Prepared{Hostname: hostname}
	if err := writeHosts(in.Pod, in.RunDir, in.PodIP); err != nil {
		return spec.Prepared{}, fmt.Errorf("container %q: %w", in.Container.Name, err)
	}
	if err := rootOwner(in).lchown(filepath.Join(in.RunDir, etcHostsFile)); err != nil {
		return spec.Prepared{}, fmt.Errorf("container %q: %w", in.Container.Name, err)
	}
	for i, vm := range in.Container.VolumeMounts {
		src, err := volumeMount(in, i, vm)
		if err != nil {
			return spec.Prepared{}, err
		}
		p.Volumes = append(p.Volumes, src)
	}
	if err := prepareManaged(in, &p); err != nil {
		return spec.Prepared{}, err
	}
	return p, nil
}

// volumeMount is the host side of the container's volumeMount at index. A subPath
// that cannot be mounted is reported in the kubelet's words.
func volumeMount(in spec.Input, index int, vm corev1.VolumeMount) (spec.Source, error) {
	src, err := bindSource(in, index, vm)
	var sub *subPathError
	switch {
	case errors.As(err, &sub):
		return spec.Source{}, fmt.Errorf("%w: %w", runner.ErrCreateConfig, err)
	case err != nil:
		return spec.Source{}, spec.VolumeError(in, vm.Name, err)
	}
	return src, nil
}

// bindSource is the bind source of one volumeMount, with the host side prepared and
// checked to deliver the mount's propagation.
func bindSource(in spec.Input, index int, vm corev1.VolumeMount) (spec.Source, error) {
	i := slices.IndexFunc(in.Pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
	if i < 0 {
		return spec.Source{}, errors.New("the pod has no such volume")
	}
	vol := &in.Pod.Spec.Volumes[i]
	src, readOnly, err := volumeSource(in, vol)
	if err != nil {
		return spec.Source{}, err
	}
	if src, err = mountSource(in, index, vm, src, vol.Image != nil); err != nil {
		return spec.Source{}, err
	}
	propagation, err := spec.Propagation(in.Container, vm)
	if err != nil {
		return spec.Source{}, err
	}
	if err := checkPropagationSource(src, propagation); err != nil {
		return spec.Source{}, err
	}
	return spec.Source{Path: src, ReadOnly: readOnly}, nil
}

// volumeSource is the host path of a volume, and whether it is read-only whatever the
// mount says (downwardAPI, configMap, secret, projected and image volumes are, as on a
// kubelet). An image volume's image is where the runtime mounted it (in.ImageVolumes).
func volumeSource(in spec.Input, vol *corev1.Volume) (string, bool, error) {
	switch {
	case vol.HostPath != nil:
		path, err := prepareHostPath(vol.HostPath)
		return path, false, err
	case vol.EmptyDir != nil:
		return volumeDir(in.PodDir, vol.Name), false, nil
	case vol.DownwardAPI != nil, readsObjects(vol):
		return volumeDir(in.PodDir, vol.Name), true, nil
	case vol.Image != nil:
		dir, ok := in.ImageVolumes[vol.Name]
		if !ok {
			return "", false, errors.New("its image is not mounted")
		}
		return dir, true, nil
	}
	return "", false, errors.New("unsupported volume source")
}

// mountSource resolves the bind source: the mount point of the volume's subPath (or
// expanded subPathExpr) in the pod's dir (prepareSubPath; in an image, an existing
// directory), or the volume itself with its symlinks resolved, as containerd's CRI
// resolves every bind source.
func mountSource(in spec.Input, index int, vm corev1.VolumeMount, src string, image bool) (string, error) {
	sub, err := spec.SubPath(in, vm)
	if err != nil {
		return "", err
	}
	if sub != "" {
		target, err := prepareSubPath(in.PodDir, vm.Name, in.Container.Name, index, src, sub, image)
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

// prepareManaged makes what the pod gives each of its containers, where the container
// mounts no volume of its own (spec.VolumeAt): the /etc files (PreparePod wrote them),
// the termination-message file and /dev/shm.
func prepareManaged(in spec.Input, p *spec.Prepared) error {
	for _, f := range []struct {
		dst, file string
		path      *string
	}{{"/etc/hosts", etcHostsFile, &p.EtcHosts}, {"/etc/hostname", hostnameFile, &p.EtcHostname}, {"/etc/resolv.conf", resolvConfFile, &p.ResolvConf}} {
		if spec.VolumeAt(in.Container, f.dst) {
			continue
		}
		src := filepath.Join(in.RunDir, f.file)
		if _, err := os.Stat(src); err != nil {
			return fmt.Errorf("mount %s: %w", f.dst, err)
		}
		*f.path = src
	}
	var err error
	if p.TerminationLog, err = prepareTerminationLog(in); err != nil {
		return err
	}
	if spec.VolumeAt(in.Container, devShm) {
		return nil
	}
	p.Shm, err = prepareShm(in)
	return err
}

// prepareTerminationLog creates the host file of the container's termination message
// for its attempt (empty, mode 0666 whatever the umask, as the kubelet's kuberuntime
// does) and returns its path, or "" when terminationMessagePath is empty or the
// container mounts a volume there.
func prepareTerminationLog(in spec.Input) (string, error) {
	dst := in.Container.TerminationMessagePath
	if dst == "" || spec.VolumeAt(in.Container, dst) {
		return "", nil
	}
	path := TerminationLogPath(in.RunDir, in.Container.Name, in.Attempt)
	if err := os.MkdirAll(filepath.Dir(path), containerDirMode); err != nil {
		return "", fmt.Errorf("create termination log dir: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("create termination log: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("create termination log: %w", err)
	}
	if err := os.Chmod(path, terminationLogMode); err != nil {
		return "", fmt.Errorf("chmod termination log: %w", err)
	}
	if err := rootOwner(in).lchown(path); err != nil {
		return "", err
	}
	return path, nil
}

// prepareShm returns the host side of the container's /dev/shm: the host's with
// hostIPC; the pod's, shared by all its containers, when they join a sandbox's IPC
// namespace (POSIX shared memory lives in /dev/shm, so sharing the IPC namespace alone
// would not share it), a tmpfs mounted here once per pod; otherwise "", which keeps
// the private 64 MiB tmpfs of containerd's default spec.
func prepareShm(in spec.Input) (string, error) {
	switch {
	case in.Pod.Spec.HostIPC:
		return devShm, nil
	case in.SandboxNS == "" || in.Pod.Spec.HostNetwork:
		return "", nil // the namespace rules of spec.Container: no shared IPC namespace
	}
	dir := filepath.Join(in.RunDir, shmDir)
	if err := os.MkdirAll(dir, podDirMode); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	if err := ensureTmpfs(dir, shmSource, shmFlags, shmData); err != nil {
		return "", err
	}
	if err := rootOwner(in).lchown(dir); err != nil {
		return "", err
	}
	return dir, nil
}
