package spec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/runner"
)

// Bind mount options, as containerd's CRI sets them (WithMounts): every bind is
// recursive, has a propagation and says ro or rw.
const (
	bindType           = "bind"
	bindRecursive      = "rbind"
	propagationPrivate = "rprivate"
	PropagationSlave   = "rslave"  // HostToContainer
	PropagationShared  = "rshared" // Bidirectional
	optReadOnly        = "ro"
	optReadWrite       = "rw"
	optRecursiveRO     = "rro" // runc >= 1.1 makes it with mount_setattr(2), kernel >= 5.12
)

// Paths every container gets from its pod, and the pod's shared /dev/shm.
const (
	etcHostsPath      = "/etc/hosts"
	etcHostnamePath   = "/etc/hostname"
	etcResolvConfPath = "/etc/resolv.conf"
	devShmPath        = "/dev/shm"
)

// Mounts mounts the container's volumes and the files the pod gives each of its
// containers: /etc/hosts, /etc/hostname, /etc/resolv.conf, the termination message and
// /dev/shm. It binds what the pod directory's preparation made (in.Prepared) and
// touches nothing on the host. Errors that come from the manifest wrap
// runner.ErrCreateConfig.
func Mounts(in Input) ([]oci.SpecOpts, error) {
	if got, want := len(in.Prepared.Volumes), len(in.Container.VolumeMounts); got != want {
		return nil, fmt.Errorf("container %q: %d of its %d volumeMounts prepared", in.Container.Name, got, want)
	}
	var mounts []specs.Mount
	for i, vm := range in.Container.VolumeMounts {
		m, err := bindVolume(in.Container, in.Prepared.Volumes[i], vm)
		if err != nil {
			return nil, VolumeError(in, vm.Name, err)
		}
		mounts = append(mounts, m)
	}
	managed, err := managedMounts(in)
	if err != nil {
		return nil, err
	}
	return []oci.SpecOpts{withMounts(append(mounts, managed...))}, nil
}

// VolumeError reports a volume the container cannot mount on this host.
func VolumeError(in Input, volume string, err error) error {
	return fmt.Errorf("%w: container %q: volume %q: %w", runner.ErrCreateConfig, in.Container.Name, volume, err)
}

// bindVolume is the bind mount of one volumeMount, from its prepared source.
func bindVolume(c *corev1.Container, src Source, vm corev1.VolumeMount) (specs.Mount, error) {
	propagation, err := Propagation(c, vm)
	if err != nil {
		return specs.Mount{}, err
	}
	opts := []string{bindRecursive, propagation, rwOption(vm.ReadOnly || src.ReadOnly)}
	if vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == corev1.RecursiveReadOnlyEnabled {
		// IfPossible stays a plain ro bind: runc 1.1 cannot tell whether it could do more.
		opts = append(opts, optRecursiveRO)
	}
	return specs.Mount{Destination: vm.MountPath, Type: bindType, Source: src.Path, Options: opts}, nil
}

// Propagation maps mountPropagation as the kubelet's translateMountPropagation and
// containerd's CRI do. Bidirectional reaches into the host's mounts: privileged only.
func Propagation(c *corev1.Container, vm corev1.VolumeMount) (string, error) {
	if vm.MountPropagation == nil {
		return propagationPrivate, nil
	}
	switch *vm.MountPropagation {
	case corev1.MountPropagationNone:
		return propagationPrivate, nil
	case corev1.MountPropagationHostToContainer:
		return PropagationSlave, nil
	case corev1.MountPropagationBidirectional:
		if !isPrivileged(c) {
			return "", errors.New("mount propagation Bidirectional needs a privileged container")
		}
		return PropagationShared, nil
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

// VolumeAt reports whether the container mounts a volume at path, where the pod would
// otherwise mount one of its files or /dev/shm: the container's own volume wins (the
// kubelet's makeMounts, containerd's CRI isInCRIMounts).
func VolumeAt(c *corev1.Container, path string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool {
		return filepath.Clean(vm.MountPath) == filepath.Clean(path)
	})
}

// managedMounts are the pod's /etc files, the termination-message file and /dev/shm,
// each left out when the container mounts a volume at its path itself (VolumeAt; the
// preparation has then made nothing for it). /etc/hosts is read-write as the kubelet
// mounts it; /etc/hostname and /etc/resolv.conf are read-only with a read-only root
// filesystem, as the CRI mounts them.
func managedMounts(in Input) ([]specs.Mount, error) {
	sc := in.Container.SecurityContext
	roRoot := sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	var out []specs.Mount
	for _, f := range []struct {
		dst, src string
		readOnly bool
	}{{etcHostsPath, in.Prepared.EtcHosts, false}, {etcHostnamePath, in.Prepared.EtcHostname, roRoot}, {etcResolvConfPath, in.Prepared.ResolvConf, roRoot}} {
		if VolumeAt(in.Container, f.dst) {
			continue
		}
		if f.src == "" {
			return nil, fmt.Errorf("mount %s: the pod's file is not prepared", f.dst)
		}
		out = append(out, bindMount(f.src, f.dst, f.readOnly))
	}
	if path := in.Prepared.TerminationLog; path != "" {
		out = append(out, bindMount(path, in.Container.TerminationMessagePath, false))
	}
	if dir := in.Prepared.Shm; dir != "" && !VolumeAt(in.Container, devShmPath) {
		out = append(out, bindMount(dir, devShmPath, false))
	}
	return out, nil
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
			if s.Linux.RootfsPropagation != PropagationShared {
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
		case slices.Contains(m.Options, PropagationShared):
			return PropagationShared
		case slices.Contains(m.Options, PropagationSlave):
			prop = PropagationSlave
		}
	}
	return prop
}
