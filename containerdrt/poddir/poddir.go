package poddir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/manifests"

	"github.com/staticpod/staticpod/internal/atomicfile"
)

// The layout of a pod's two directories, after the kubelet's
// /var/lib/kubelet/pods/<uid>: <root-dir>/pods/<uid> holds what may outlive a boot of
// the machine (volumes), <run-dir>/pods/<uid> what may not (the /etc files, /dev/shm,
// termination logs). A pod prepared before the second existed has all in the first.
const (
	etcHostsFile   = "etc-hosts"     // run dir: the pod's /etc/hosts
	hostnameFile   = "hostname"      // run dir: the pod's /etc/hostname
	resolvConfFile = "resolv.conf"   // run dir: the pod's /etc/resolv.conf
	containersDir  = "containers"    // run dir: containers/<name>/<attempt>.termination-log
	shmDir         = "shm"           // run dir: the /dev/shm its containers share through the sandbox
	volumesDir     = "volumes"       // volumes/<name>: emptyDir, downwardAPI, configMap, secret and projected volumes
	imageVolumeDir = "image-volumes" // image-volumes/<id>: the images of image volumes, mounted read-only

	podDirMode      = 0o750
	etcFileMode     = 0o644 // the kubelet's ensureHostsFile mode
	emptyDirMode    = 0o777 // the kubelet's emptyDir mode: any container user may write
	downwardDirMode = 0o755
)

// PreparePod creates the pod's directories (podDir, runDir: see the layout above) and
// what every container of the pod mounts from them: /etc/hostname and /etc/resolv.conf (/etc/hosts, which names the pod's IP, is
// written with each container: PrepareContainer), emptyDir directories (tmpfs for medium Memory), downwardAPI
// files, and the files of configMap, secret and projected volumes from objs (secret and
// projected volumes on a tmpfs). It is idempotent, and is called before the containers
// each sync creates, so files follow the host (its /etc/hosts, its resolv.conf) as they
// do on a kubelet.
func PreparePod(pod *corev1.Pod, podDir, runDir, hostIP string, objs manifests.Objects) error {
	for _, dir := range []string{podDir, runDir} {
		if err := os.MkdirAll(dir, podDirMode); err != nil {
			return fmt.Errorf("create pod dir %s: %w", dir, err)
		}
	}
	if err := writeEtcFiles(pod, runDir); err != nil {
		return err
	}
	// Downward API values come from the pod as a container of it would see them; a
	// volume's resourceFieldRef always names its container.
	in := spec.Input{Pod: pod, Container: &corev1.Container{}, PodDir: podDir, RunDir: runDir, HostIP: hostIP, Objects: objs}
	var err error
	if in.UserNSHostID, err = userNamespace(pod, podDir); err != nil {
		return fmt.Errorf("prepare pod dir %s: %w", podDir, err)
	}
	for _, f := range []string{hostnameFile, resolvConfFile} {
		if err := rootOwner(in).lchown(filepath.Join(runDir, f)); err != nil {
			return err
		}
	}
	for i := range pod.Spec.Volumes {
		if err := prepareVolume(in, &pod.Spec.Volumes[i]); err != nil {
			return fmt.Errorf("prepare volume %s: %w", pod.Spec.Volumes[i].Name, err)
		}
	}
	return nil
}

// Remove unmounts every mount under the pod's directories (subPath binds first, then
// tmpfs emptyDirs, the pod's /dev/shm, the images of image volumes), deepest first and
// lazily (MNT_DETACH: a container that still runs keeps its view), then removes the
// directories. A missing directory is not an error. The host's mount table is read
// once for all of them: reading it costs the kernel every mount's line.
func Remove(podDirs ...string) error {
	var dirs []string // resolved
	for _, podDir := range podDirs {
		dir, err := filepath.EvalSymlinks(podDir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("remove pod dir %s: %w", podDir, err)
		}
		if err := cleanSubPaths(dir); err != nil {
			return fmt.Errorf("remove pod dir %s: %w", podDir, err)
		}
		dirs = append(dirs, dir)
	}
	if len(dirs) == 0 {
		return nil
	}
	if err := unmountUnder(dirs...); err != nil {
		return fmt.Errorf("remove pod dirs %s: %w", strings.Join(podDirs, ", "), err)
	}
	for _, dir := range dirs {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove pod dir %s: %w", dir, err)
		}
	}
	return nil
}

// unmountUnder detaches every mount at or below one of dirs (resolved), deepest first.
func unmountUnder(dirs ...string) error {
	mounts, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		for _, dir := range dirs {
			if m.Mountpoint == dir || strings.HasPrefix(m.Mountpoint, dir+"/") {
				return false, false
			}
		}
		return true, false
	})
	if err != nil {
		return fmt.Errorf("read mountinfo: %w", err)
	}
	slices.SortStableFunc(mounts, func(a, b *mountinfo.Info) int {
		return len(b.Mountpoint) - len(a.Mountpoint)
	})
	var errs []error
	for _, m := range mounts {
		err := unix.Unmount(m.Mountpoint, unix.MNT_DETACH)
		if err != nil && err != unix.EINVAL && err != unix.ENOENT { // EINVAL: already gone
			errs = append(errs, fmt.Errorf("unmount %s: %w", m.Mountpoint, err))
		}
	}
	return errors.Join(errs...)
}

// TerminationLogPath is the host file a container's terminationMessagePath is bound to,
// one per attempt so that the message of the previous attempt stays readable.
func TerminationLogPath(podDir, container string, attempt int) string {
	return filepath.Join(podDir, containersDir, container, strconv.Itoa(attempt)+".termination-log")
}

// ImageVolumeDir is where the image of an image volume, named by id (a digest's hex
// part, of what is mounted), is mounted in the pod's directory: once per pod and image,
// however many volumes and containers use it, as containerd's CRI mounts one per
// sandbox and image. Remove unmounts it with the rest.
func ImageVolumeDir(podDir, id string) (string, error) {
	if id == "" || id == "." || id == ".." || strings.Contains(id, "/") {
		return "", fmt.Errorf("image volume id %q cannot be a path component", id)
	}
	return filepath.Join(podDir, imageVolumeDir, id), nil
}

// EtcHostsFile is the pod's /etc/hosts in its run dir; HostnameFile its /etc/hostname.
const (
	EtcHostsFile = etcHostsFile
	HostnameFile = hostnameFile
)

// VolumeDir is the directory of a volume made in the pod's directory: an emptyDir
// (a tmpfs mounted there for medium Memory), downwardAPI, configMap, secret or
// projected volume.
func VolumeDir(podDir, volume string) string { return volumeDir(podDir, volume) }

// volumeDir is the directory of an emptyDir or downwardAPI volume.
func volumeDir(podDir, volume string) string {
	return filepath.Join(podDir, volumesDir, volume)
}

// writeInPlace writes content to path unless it already holds it. An existing file is
// rewritten in place, not replaced: running containers have its inode bind-mounted, and
// the containers of a pod must keep sharing one /etc/hosts, as on a kubelet (which
// rewrites it with os.WriteFile before each container starts).
func writeInPlace(path string, content []byte, mode fs.FileMode) error {
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return atomicfile.WriteFile(path, content, mode)
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	case bytes.Equal(old, content):
		return nil
	}
	if err := os.WriteFile(path, content, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
