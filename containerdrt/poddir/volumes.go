package poddir

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
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
	"github.com/staticpod/staticpod/runner"

	"github.com/staticpod/staticpod/internal/atomicfile"
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

// writeDownwardAPI writes the files of a downwardAPI volume into dir, each replaced
// atomically so that a container reading it never sees a part, with the item's mode or
// the volume's default mode.
func writeDownwardAPI(in spec.Input, src *corev1.DownwardAPIVolumeSource, dir string) error {
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
		if err := atomicfile.WriteFile(path, []byte(value), mode); err != nil {
			return err
		}
	}
	return nil
}

// downwardValue is the content of a downwardAPI file: labels and annotations as whole
// maps, which environment variables cannot hold, or the value an environment variable
// would get.
func downwardValue(in spec.Input, item corev1.DownwardAPIVolumeFile) (string, error) {
	switch {
	case item.FieldRef != nil && item.FieldRef.FieldPath == "metadata.labels":
		return formatMap(in.Pod.Labels), nil
	case item.FieldRef != nil && item.FieldRef.FieldPath == "metadata.annotations":
		return formatMap(in.Pod.Annotations), nil
	case item.FieldRef != nil:
		return spec.FieldRefValue(in, item.FieldRef)
	case item.ResourceFieldRef != nil:
		return spec.ResourceFieldRefValue(in, item.ResourceFieldRef)
	}
	return "", errors.New("neither fieldRef nor resourceFieldRef is set")
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
