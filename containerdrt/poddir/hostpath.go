package poddir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/spec"
)

// Modes of what a hostPath volume creates, as the kubelet's hostPath plugin
// (pkg/volume/hostpath/host_path.go, makeDir and makeFile) creates them.
const (
	hostPathDirMode  = 0o755
	hostPathFileMode = 0o644
)

// Kinds of file a hostPath type check reports, in the kubelet's words.
const (
	kindDirectory   = "directory"
	kindFile        = "file"
	kindSocket      = "socket file"
	kindCharDevice  = "character device"
	kindBlockDevice = "block device"
	kindOther       = "special file"
)

// prepareHostPath applies the type check of a hostPath volume, creating what the
// *OrCreate types create, and returns the path to bind. It follows the kubelet's
// checkType: DirectoryOrCreate makes the directory with its parents; FileOrCreate makes
// an empty file but never its parent directory; the other types only check; a type
// check follows symlinks (os.Stat), as the kubelet's hostutil does. An unset type checks
// nothing, and a path that does not exist is created as a directory, as containerd's CRI
// does for any bind mount source that is missing.
func prepareHostPath(hp *corev1.HostPathVolumeSource) (string, error) {
	path := hp.Path
	typ := corev1.HostPathUnset
	if hp.Type != nil {
		typ = *hp.Type
	}
	switch typ {
	case corev1.HostPathUnset:
		return path, createMissingDir(path)
	case corev1.HostPathDirectoryOrCreate:
		if err := createMissingDir(path); err != nil {
			return "", err
		}
	case corev1.HostPathFileOrCreate:
		if err := createMissingFile(path); err != nil {
			return "", err
		}
	}
	return path, checkHostPathType(path, typ)
}

// checkHostPathType reports whether path is what typ asks for.
func checkHostPathType(path string, typ corev1.HostPathType) error {
	want, ok := map[corev1.HostPathType]string{
		corev1.HostPathDirectory:         kindDirectory,
		corev1.HostPathDirectoryOrCreate: kindDirectory,
		corev1.HostPathFile:              kindFile,
		corev1.HostPathFileOrCreate:      kindFile,
		corev1.HostPathSocket:            kindSocket,
		corev1.HostPathCharDev:           kindCharDevice,
		corev1.HostPathBlockDev:          kindBlockDevice,
	}[typ]
	if !ok {
		return fmt.Errorf("hostPath %s has an unknown type %q", path, typ)
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hostPath %s does not exist (type %s)", path, typ)
	}
	if err != nil {
		return fmt.Errorf("hostPath %s: %w (type %s)", path, err, typ)
	}
	if got := fileKind(fi.Mode()); got != want {
		return fmt.Errorf("hostPath %s is not a %s (type %s) but a %s", path, want, typ, got)
	}
	return nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return kindDirectory
	case m.IsRegular():
		return kindFile
	case m&fs.ModeSocket != 0:
		return kindSocket
	case m&fs.ModeCharDevice != 0:
		return kindCharDevice
	case m&fs.ModeDevice != 0:
		return kindBlockDevice
	}
	return kindOther
}

func createMissingDir(path string) error {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil // present, or unreadable: the type check or the bind reports it
	}
	if err := os.MkdirAll(path, hostPathDirMode); err != nil {
		return fmt.Errorf("create hostPath directory %s: %w", path, err)
	}
	return nil
}

func createMissingFile(path string) error {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, hostPathFileMode)
	if err != nil {
		return fmt.Errorf("create hostPath file %s: %w", path, err)
	}
	return f.Close()
}

// within reports whether path is root or below it; both are clean and absolute.
func within(root, path string) bool {
	return path == root || strings.HasPrefix(path, strings.TrimSuffix(root, "/")+"/")
}

// checkPropagationSource refuses a propagation the host cannot deliver, as containerd's
// CRI does (ensureShared, ensureSharedOrSlave in its WithMounts): rshared needs the
// source on a shared mount, rslave on a shared or slave one. Otherwise the mount would
// silently propagate nothing.
func checkPropagationSource(src, propagation string) error {
	if propagation != spec.PropagationShared && propagation != spec.PropagationSlave {
		return nil
	}
	m, err := mountOf(src)
	if err != nil {
		return err
	}
	shared, slave := false, false
	for _, opt := range strings.Fields(m.Optional) {
		shared = shared || strings.HasPrefix(opt, "shared:")
		slave = slave || strings.HasPrefix(opt, "master:")
	}
	switch {
	case shared:
		return nil
	case propagation == spec.PropagationShared:
		return fmt.Errorf("%s is on mount %s, which is not shared (needed by Bidirectional propagation)", src, m.Mountpoint)
	case !slave:
		return fmt.Errorf("%s is on mount %s, which is neither shared nor slave (needed by HostToContainer propagation)", src, m.Mountpoint)
	}
	return nil
}

// mountOf returns the mount that holds path (clean, absolute, symlinks resolved): the
// deepest mount point at or above it, the last one listed when mounts are stacked.
func mountOf(path string) (*mountinfo.Info, error) {
	mounts, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return !within(m.Mountpoint, path), false
	})
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	var best *mountinfo.Info
	for _, m := range mounts {
		if best == nil || len(m.Mountpoint) >= len(best.Mountpoint) {
			best = m
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no mount holds %s", path)
	}
	return best, nil
}
