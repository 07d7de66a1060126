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
	"github.com/staticpod/staticpod/internal/atomicfile"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// The volumes of a pod, made in its directory: emptyDirs (a tmpfs for medium Memory),
// and the volumes whose files come from the pod's data (below).

// prepareVolume creates what a volume of the pod needs in the pod dir.
func prepareVolume(in spec.Input, vol *corev1.Volume) error {
	switch {
	case vol.EmptyDir != nil:
		dir := volumeDir(in.PodDir, vol.Name)
		if err := prepareEmptyDir(in.Pod, dir, vol.EmptyDir); err != nil {
			return err
		}
		return rootOwner(in).lchown(dir) // its content is the containers'
	case vol.DownwardAPI != nil:
		if err := writeDownwardAPI(in, vol.DownwardAPI, volumeDir(in.PodDir, vol.Name)); err != nil {
			return err
		}
		return rootOwner(in).lchownTree(volumeDir(in.PodDir, vol.Name))
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

// The volumes whose files come from the pod's data: those read from the ConfigMaps
// and Secrets of the pod's source (manifests.Objects), projected volumes, and the
// downward API's files of the pod's own fields; the environment variables read from
// them are the spec's (spec.Process). Secret and projected volumes are a tmpfs, as on a kubelet, so that
// secrets never reach the disk; configMap volumes are directories of the pod dir.
// Every one of them is written with writeProjected, and mounted read-only.

// projectedTmpfsData are the mount options of a secret or projected volume's tmpfs.
const projectedTmpfsData = "mode=0755"

// readsObjects reports whether a volume is filled from ConfigMaps and Secrets (and
// downward API files, for a projected one).
func readsObjects(vol *corev1.Volume) bool {
	return vol.ConfigMap != nil || vol.Secret != nil || vol.Projected != nil
}

// inMemory reports whether a volume of readsObjects is a tmpfs.
func inMemory(vol *corev1.Volume) bool { return vol.Secret != nil || vol.Projected != nil }

// prepareObjectVolume makes a configMap, secret or projected volume: its directory,
// its tmpfs, and its files.
func prepareObjectVolume(in spec.Input, vol *corev1.Volume, dir string) error {
	if err := os.MkdirAll(dir, projectedDirMod); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if inMemory(vol) {
		if err := ensureTmpfs(dir, "tmpfs", 0, projectedTmpfsData); err != nil {
			return err
		}
	}
	if err := volumeOwner(in).dirOwner().lchown(dir); err != nil {
		return err
	}
	return fillObjectVolume(in, vol, dir)
}

// fillObjectVolume writes the files of a volume as its objects hold them now.
func fillObjectVolume(in spec.Input, vol *corev1.Volume, dir string) error {
	files, err := volumeFiles(in, vol)
	if err != nil {
		return fmt.Errorf("%w: %w", runner.ErrCreateConfig, err)
	}
	_, err = writeProjected(dir, files, volumeOwner(in))
	return err
}

// fsGroup is the group that owns the files of the pod's volumes, -1 for none.
func fsGroup(pod *corev1.Pod) int {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return int(*sc.FSGroup)
	}
	return -1
}

// volumeFiles are the files a configMap, secret or projected volume holds, as the
// kubelet's volume plugins make them: every key of the object (or the items asked
// for) with the item's mode or the volume's default mode; a missing object or key is
// an error unless the reference is optional.
func volumeFiles(in spec.Input, vol *corev1.Volume) (map[string]projectedFile, error) {
	files := map[string]projectedFile{}
	ns := in.Pod.Namespace
	group := fsGroup(in.Pod)
	switch {
	case vol.ConfigMap != nil:
		s := vol.ConfigMap
		ref := manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: ns, Name: s.Name}
		return files, project(files, in.Objects, ref, s.Items, s.Optional, s.DefaultMode, group)
	case vol.Secret != nil:
		s := vol.Secret
		ref := manifests.ObjectRef{Kind: manifests.KindSecret, Namespace: ns, Name: s.SecretName}
		return files, project(files, in.Objects, ref, s.Items, s.Optional, s.DefaultMode, group)
	case vol.Projected != nil:
		for _, src := range vol.Projected.Sources {
			var err error
			switch {
			case src.ConfigMap != nil:
				ref := manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: ns, Name: src.ConfigMap.Name}
				err = project(files, in.Objects, ref, src.ConfigMap.Items, src.ConfigMap.Optional, vol.Projected.DefaultMode, group)
			case src.Secret != nil:
				ref := manifests.ObjectRef{Kind: manifests.KindSecret, Namespace: ns, Name: src.Secret.Name}
				err = project(files, in.Objects, ref, src.Secret.Items, src.Secret.Optional, vol.Projected.DefaultMode, group)
			case src.DownwardAPI != nil:
				err = projectDownwardAPI(files, in, src.DownwardAPI.Items, vol.Projected.DefaultMode, group)
			}
			if err != nil {
				return nil, err
			}
		}
		return files, nil
	}
	return nil, errors.New("not a configMap, secret or projected volume")
}

// project adds the files of one object to files.
func project(files map[string]projectedFile, objs manifests.Objects, ref manifests.ObjectRef, items []corev1.KeyToPath, optional *bool, defaultMode *int32, group int) error {
	opt := optional != nil && *optional
	data, ok := objs.Data(ref)
	if !ok {
		if opt {
			return nil
		}
		return spec.NotFound(ref)
	}
	if len(items) == 0 {
		for _, k := range slices.Sorted(maps.Keys(data)) {
			files[k] = projectedFile{data: data[k], mode: fileMode(nil, defaultMode, group)}
		}
		return nil
	}
	for _, item := range items {
		v, ok := data[item.Key]
		if !ok {
			if opt {
				continue
			}
			return fmt.Errorf("%s references non-existent key: %s", ref, item.Key)
		}
		files[item.Path] = projectedFile{data: v, mode: fileMode(item.Mode, defaultMode, group)}
	}
	return nil
}

// projectDownwardAPI adds the downward API files of a projected volume to files.
func projectDownwardAPI(files map[string]projectedFile, in spec.Input, items []corev1.DownwardAPIVolumeFile, defaultMode *int32, group int) error {
	for _, item := range items {
		v, err := downwardValue(in, item)
		if err != nil {
			return fmt.Errorf("file %s: %w", item.Path, err)
		}
		files[item.Path] = projectedFile{data: []byte(v), mode: fileMode(item.Mode, defaultMode, group)}
	}
	return nil
}

// fileMode is an item's mode, else the volume's default mode (0644 when unset), made
// readable by the fsGroup when there is one, as the kubelet's SetVolumeOwnership does
// for a read-only volume.
func fileMode(mode, defaultMode *int32, group int) fs.FileMode {
	m := fs.FileMode(corev1.ConfigMapVolumeSourceDefaultMode)
	if p := cmp.Or(mode, defaultMode); p != nil {
		m = fs.FileMode(*p)
	}
	if group >= 0 {
		m |= 0o440
	}
	return m
}

// SyncVolumes brings the configMap, secret and projected volumes of the pod at podDir
// up to date with objs, and returns the names of those it changed. A volume not made
// yet is left for PreparePod; so is a tmpfs volume whose tmpfs is gone (the machine
// restarted): the next container of the pod makes it again, and a running container
// still sees what it had.
func SyncVolumes(pod *corev1.Pod, podDir, hostIP string, objs manifests.Objects) (changed []string, _ error) {
	in := spec.Input{Pod: pod, Container: &corev1.Container{}, PodDir: podDir, HostIP: hostIP, Objects: objs}
	var err error
	if in.UserNSHostID, err = userNamespace(pod, podDir); err != nil {
		return nil, fmt.Errorf("sync volumes: %w", err)
	}
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if !readsObjects(vol) {
			continue
		}
		dir := volumeDir(podDir, vol.Name)
		if _, err := os.Lstat(dir); err != nil {
			continue
		}
		if inMemory(vol) {
			if mounted, err := mountinfo.Mounted(dir); err != nil || !mounted {
				continue
			}
		}
		files, err := volumeFiles(in, vol)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
			continue
		}
		written, err := writeProjected(dir, files, volumeOwner(in))
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
			continue
		}
		if written {
			changed = append(changed, vol.Name)
		}
	}
	return changed, errors.Join(errs...)
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
