package containerdrt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// The volumes and environment variables read from the ConfigMaps and Secrets of the
// pod's source (manifests.Objects). Secret and projected volumes are a tmpfs, as on a
// kubelet, so that secrets never reach the disk; configMap volumes are directories
// of the pod dir. Every one of them is written with writeProjected, and mounted
// read-only.

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
func prepareObjectVolume(in specInput, vol *corev1.Volume, dir string) error {
	if err := os.MkdirAll(dir, projectedDirMod); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if inMemory(vol) {
		if err := ensureTmpfs(dir, "tmpfs", 0, projectedTmpfsData); err != nil {
			return err
		}
	}
	return fillObjectVolume(in, vol, dir)
}

// fillObjectVolume writes the files of a volume as its objects hold them now.
func fillObjectVolume(in specInput, vol *corev1.Volume, dir string) error {
	files, err := volumeFiles(in, vol)
	if err != nil {
		return fmt.Errorf("%w: %w", runner.ErrCreateConfig, err)
	}
	_, err = writeProjected(dir, files, fsGroup(in.Pod))
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
func volumeFiles(in specInput, vol *corev1.Volume) (map[string]projectedFile, error) {
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
		return notFound(ref)
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
func projectDownwardAPI(files map[string]projectedFile, in specInput, items []corev1.DownwardAPIVolumeFile, defaultMode *int32, group int) error {
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

func notFound(ref manifests.ObjectRef) error {
	return fmt.Errorf("%s %q not found (no such document beside the pod in namespace %s)", strings.ToLower(ref.Kind), ref.Name, ref.Namespace)
}

// objectEnv adds the variables of the container's envFrom, in order (a later source
// overrides an earlier one, and env overrides them all). Keys that are not valid
// variable names are skipped, as the kubelet skips them.
func objectEnv(in specInput, env *envList) error {
	for _, from := range in.Container.EnvFrom {
		var ref manifests.ObjectRef
		var optional *bool
		switch {
		case from.ConfigMapRef != nil:
			ref = manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: in.Pod.Namespace, Name: from.ConfigMapRef.Name}
			optional = from.ConfigMapRef.Optional
		case from.SecretRef != nil:
			ref = manifests.ObjectRef{Kind: manifests.KindSecret, Namespace: in.Pod.Namespace, Name: from.SecretRef.Name}
			optional = from.SecretRef.Optional
		default:
			continue
		}
		data, ok := in.Objects.Data(ref)
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return fmt.Errorf("%w: container %q: envFrom: %w", runner.ErrCreateConfig, in.Container.Name, notFound(ref))
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			name := from.Prefix + k
			if len(validation.IsRelaxedEnvVarName(name)) == 0 {
				env.set(name + "=" + string(data[k]))
			}
		}
	}
	return nil
}

// keyRefValue is the value of an env[].valueFrom configMapKeyRef or secretKeyRef, and
// whether the variable is set at all (an optional reference to what is missing leaves
// it unset).
func keyRefValue(in specInput, src *corev1.EnvVarSource) (string, bool, error) {
	var ref manifests.ObjectRef
	var key string
	var optional *bool
	switch {
	case src.ConfigMapKeyRef != nil:
		r := src.ConfigMapKeyRef
		ref, key, optional = manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: in.Pod.Namespace, Name: r.Name}, r.Key, r.Optional
	case src.SecretKeyRef != nil:
		r := src.SecretKeyRef
		ref, key, optional = manifests.ObjectRef{Kind: manifests.KindSecret, Namespace: in.Pod.Namespace, Name: r.Name}, r.Key, r.Optional
	}
	opt := optional != nil && *optional
	data, ok := in.Objects.Data(ref)
	if !ok {
		if opt {
			return "", false, nil
		}
		return "", false, notFound(ref)
	}
	v, ok := data[key]
	if !ok {
		if opt {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in %s", key, ref)
	}
	return string(v), true, nil
}

// SyncVolumes brings the pod's configMap, secret and projected volumes up to date with
// objs (see runner.Runtime). A volume not made yet is left for CreateContainer; so is
// a tmpfs volume whose tmpfs is gone (the machine restarted): the next container of
// the pod makes it again, and a running container still sees what it had.
func (r *Runtime) SyncVolumes(ctx context.Context, pod *corev1.Pod, objs manifests.Objects) error {
	podDir, err := r.podDir(pod.UID)
	if err != nil {
		return fmt.Errorf("sync volumes: %w", err)
	}
	in := specInput{Pod: pod, Container: &corev1.Container{}, PodDir: podDir, HostIP: r.cfg.HostIP, Objects: objs}
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
		changed, err := writeProjected(dir, files, fsGroup(pod))
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
			continue
		}
		if changed {
			r.log.Info("volume updated", "pod", manifests.Key(pod), "uid", pod.UID, "volume", vol.Name)
		}
	}
	return errors.Join(errs...)
}
