package poddir

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// prepareVolume creates what a volume of the pod needs in the pod dir.
func prepareVolume(in spec.Input, vol *corev1.Volume) error {
	switch {
	case vol.EmptyDir != nil:
		return prepareEmptyDir(in.Pod, volumeDir(in.PodDir, vol.Name), vol.EmptyDir)
	case vol.DownwardAPI != nil:
		return writeDownwardAPI(in, vol.DownwardAPI, volumeDir(in.PodDir, vol.Name))
	case readsObjects(vol):
		return prepareObjectVolume(in, vol, volumeDir(in.PodDir, vol.Name))
	}
	return nil // hostPath volumes are checked per container, by PrepareContainer
}

// prepareEmptyDir creates an emptyDir volume: a directory with mode 0777 (set after
// creation, as the kubelet's emptyDir setupDir does, because of the umask), and for
// medium Memory a tmpfs mounted on it once per pod, so that all its containers share it.
func prepareEmptyDir(pod *corev1.Pod, dir string, src *corev1.EmptyDirVolumeSource) error {
	if err := os.MkdirAll(dir, emptyDirMode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, emptyDirMode); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	switch {
	case src.Medium == corev1.StorageMediumMemory:
		return ensureTmpfs(dir, "tmpfs", 0, tmpfsSizeOption(pod, src))
	case strings.HasPrefix(string(src.Medium), string(corev1.StorageMediumHugePages)):
		return fmt.Errorf("%w: emptyDir medium %s is not supported", runner.ErrCreateConfig, src.Medium)
	}
	return nil
}

// tmpfsSizeOption sizes a memory-backed emptyDir as the kubelet does
// (pkg/volume/emptydir calculateEmptyDirMemorySize): the smallest of the node's memory,
// the pod's memory limit when every container declares one, and sizeLimit.
func tmpfsSizeOption(pod *corev1.Pod, src *corev1.EmptyDirVolumeSource) string {
	size, _ := spec.MemTotal()                                  // the kubelet's node allocatable, without reservations
	podLimit := manifests.PodLimits(pod)[corev1.ResourceMemory] // as the kubelet's pod cgroup has it
	if limit := podLimit.Value(); limit > 0 && (size == 0 || limit < size) {
		size = limit
	}
	if src.SizeLimit != nil && src.SizeLimit.Sign() > 0 && (size == 0 || src.SizeLimit.Value() < size) {
		size = src.SizeLimit.Value()
	}
	if size == 0 {
		return "" // the kernel's default: half of the memory
	}
	return "size=" + strconv.FormatInt(size, 10)
}

// ensureTmpfs mounts a tmpfs on dir unless something is mounted there already.
func ensureTmpfs(dir, source string, flags uintptr, data string) error {
	mounted, err := mountinfo.Mounted(dir)
	if err != nil {
		return fmt.Errorf("check mount at %s: %w", dir, err)
	}
	if mounted {
		return nil
	}
	if err := unix.Mount(source, dir, "tmpfs", flags, data); err != nil {
		return fmt.Errorf("mount tmpfs at %s (%s): %w", dir, data, err)
	}
	return nil
}
