package spec

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cap"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/runner"
)

const (
	capPrefix = "CAP_"
	capAll    = "ALL"
	rootUser  = "0"
)

// Security applies the container's securityContext, falling back to the pod's for
// the fields both have, with the kubelet's and containerd CRI's rules: the user and its
// groups, runAsNonRoot, capabilities, privileged, no_new_privs, a read-only root,
// the AppArmor profile (in.AppArmorProfile) and seccomp. Options that look users up
// read the image's /etc/passwd and /etc/group from in.ImageUserFiles, else from the
// container's snapshot.
func Security(in Input) ([]oci.SpecOpts, error) {
	name := in.Container.Name
	sc := effectiveSecurityContext(in.Pod, in.Container)
	if err := verifyRunAsNonRoot(name, sc, in.Image.User); err != nil {
		return nil, err
	}
	opts := userOpts(in, sc)
	capOpts, err := capabilityOpts(name, sc.Capabilities, currentCapabilities)
	if err != nil {
		return nil, err
	}
	opts = append(opts, capOpts...)
	privileged := isPrivileged(in.Container)
	if privileged {
		// As the CRI: every capability staticpod holds, no masked or read-only paths,
		// writable /sys, every host device, no LSM or seccomp confinement. (The
		// cgroupfs, mounted later, is writable too: Cgroups.)
		opts = append(opts, oci.WithPrivileged, oci.WithHostDevices, oci.WithAllDevicesAllowed)
	}
	if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
		// As the kubelet: an unmasked /proc, which validation allows only in a user
		// namespace of the pod's own (hostUsers: false), has no masked or read-only paths.
		opts = append(opts, oci.WithMaskedPaths(nil), oci.WithReadonlyPaths(nil))
	}
	// containerd's default spec sets no_new_privs; the kubelet sets it only when
	// allowPrivilegeEscalation is false (securitycontext.AddNoNewPrivileges), so a nil
	// means setuid binaries work, as on a cluster.
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		opts = append(opts, oci.WithNoNewPrivileges)
	} else {
		opts = append(opts, oci.WithNewPrivileges)
	}
	if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		opts = append(opts, oci.WithRootFSReadonly())
	}
	opts = append(opts, appArmorOpts(in)...)
	// Last: containerd's default profile allows syscalls by the capabilities set above.
	seccomp, err := seccompOpt(in, sc.SeccompProfile, privileged)
	if err != nil {
		return nil, err
	}
	return append(opts, seccomp), nil
}

// isPrivileged reports whether the container runs privileged (only a container's
// securityContext has the field).
func isPrivileged(c *corev1.Container) bool {
	sc := c.SecurityContext
	return sc != nil && sc.Privileged != nil && *sc.Privileged
}

// effectiveSecurityContext is the container's securityContext with the fields the pod
// also has taken from the pod where the container leaves them unset, as the kubelet's
// securitycontext.DetermineEffectiveSecurityContext does. It is never nil.
func effectiveSecurityContext(pod *corev1.Pod, c *corev1.Container) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{}
	if c.SecurityContext != nil {
		sc = c.SecurityContext.DeepCopy()
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return sc
	}
	sc.RunAsUser = cmp.Or(sc.RunAsUser, psc.RunAsUser)
	sc.RunAsGroup = cmp.Or(sc.RunAsGroup, psc.RunAsGroup)
	sc.RunAsNonRoot = cmp.Or(sc.RunAsNonRoot, psc.RunAsNonRoot)
	sc.SeccompProfile = cmp.Or(sc.SeccompProfile, psc.SeccompProfile)
	sc.SELinuxOptions = cmp.Or(sc.SELinuxOptions, psc.SELinuxOptions)
	sc.AppArmorProfile = cmp.Or(sc.AppArmorProfile, psc.AppArmorProfile)
	return sc
}

// verifyRunAsNonRoot refuses a container that must not run as root but would, as the
// kubelet's verifyRunAsNonRoot does: runAsUser 0, or no runAsUser and an image user
// that is root (an empty USER is root) or a name, which cannot be checked without
// reading the image's /etc/passwd.
func verifyRunAsNonRoot(name string, sc *corev1.SecurityContext, imageUser string) error {
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	if sc.RunAsUser != nil {
		if *sc.RunAsUser == 0 {
			return fmt.Errorf("%w: container %q: runAsNonRoot is set but securityContext.runAsUser is 0 (root)", runner.ErrCreateConfig, name)
		}
		return nil
	}
	user, _, _ := strings.Cut(imageUser, ":")
	if user == "" {
		return fmt.Errorf("%w: container %q: runAsNonRoot is set but the image runs as root (no USER); set securityContext.runAsUser to a non-zero uid", runner.ErrCreateConfig, name)
	}
	uid, err := strconv.ParseInt(user, 10, 64)
	switch {
	case err != nil:
		return fmt.Errorf("%w: container %q: runAsNonRoot is set but the image has non-numeric user (%s), cannot verify user is non-root; set securityContext.runAsUser to a non-zero uid", runner.ErrCreateConfig, name, user)
	case uid == 0:
		return fmt.Errorf("%w: container %q: runAsNonRoot is set but the image runs as root (uid 0); set securityContext.runAsUser to a non-zero uid", runner.ErrCreateConfig, name)
	case uid < 0 || uid > math.MaxInt32:
		return fmt.Errorf("%w: container %q: runAsNonRoot is set but the image has an invalid user id (%d), must be 1-%d", runner.ErrCreateConfig, name, uid, math.MaxInt32)
	}
	return nil
}

// userOpts sets the process's uid, gid and supplementary groups. runAsUser and
// runAsGroup win; the gid of a runAsUser alone, and the uid of a runAsGroup alone,
// come from the image (its /etc/passwd, its USER). Without either the image's USER
// applies whole, "uid:gid" included. (The kubelet passes only the uid of an image's
// USER to the CRI, so a cluster drops its group: kubernetes#61967. Honouring it is the
// OCI image spec's meaning, and what Docker does.)
func userOpts(in Input, sc *corev1.SecurityContext) []oci.SpecOpts {
	imageUser, _, _ := strings.Cut(in.Image.User, ":")
	var user oci.SpecOpts
	switch uid, gid := sc.RunAsUser, sc.RunAsGroup; {
	case uid != nil && gid != nil:
		user = oci.WithUIDGID(uint32(*uid), uint32(*gid))
	case uid != nil:
		user = oci.WithUserID(uint32(*uid))
	case gid != nil:
		user = oci.WithUser(cmp.Or(imageUser, rootUser) + ":" + strconv.FormatInt(*gid, 10))
	case in.Image.User != "":
		user = oci.WithUser(in.Image.User)
	default:
		user = oci.WithUIDGID(0, 0)
	}
	// The user whose groups in the image's /etc/group are added, as the CRI names it.
	groupsOf := cmp.Or(imageUser, rootUser)
	if sc.RunAsUser != nil {
		groupsOf = strconv.FormatInt(*sc.RunAsUser, 10)
	}
	opts := []oci.SpecOpts{user, withGroups(groupsOf, in.Pod.Spec.SecurityContext)}
	if in.ImageUserFiles != "" {
		return []oci.SpecOpts{inUserFiles(in.ImageUserFiles, opts...)}
	}
	return opts
}

// inUserFiles applies opts, which look users and groups up in the image, to the copy of
// the image's user files in dir rather than to the container's snapshot: containerd's
// lookups read a container without a snapshot from the spec's root path, which is dir
// while they run.
func inUserFiles(dir string, opts ...oci.SpecOpts) oci.SpecOpts {
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *oci.Spec) error {
		bare := *c
		bare.Snapshotter, bare.SnapshotKey = "", ""
		root := s.Root
		s.Root = &specs.Root{Path: dir}
		defer func() { s.Root = root }()
		for _, o := range opts {
			if err := o(ctx, cl, &bare, s); err != nil {
				return err
			}
		}
		return nil
	}
}

// withGroups sets the supplementary groups as the kubelet and the CRI do: the primary
// gid, the fsGroup, the pod's supplementalGroups and (with the default policy Merge)
// the groups that list the user in the image's /etc/group; sorted, no duplicates.
// It must follow the option that set the user, which left only the primary gid.
func withGroups(user string, psc *corev1.PodSecurityContext) oci.SpecOpts {
	var extra []uint32
	strict := false
	if psc != nil {
		if psc.FSGroup != nil {
			extra = append(extra, uint32(*psc.FSGroup))
		}
		for _, g := range psc.SupplementalGroups {
			extra = append(extra, uint32(g))
		}
		strict = psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == corev1.SupplementalGroupsPolicyStrict
	}
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *oci.Spec) error {
		gids := append([]uint32{s.Process.User.GID}, s.Process.User.AdditionalGids...)
		if !strict {
			if err := oci.WithAdditionalGIDs(user)(ctx, cl, c, s); err != nil {
				return fmt.Errorf("groups of user %s: %w", user, err)
			}
			gids = append(gids, s.Process.User.AdditionalGids...)
		}
		gids = append(gids, extra...)
		slices.Sort(gids)
		s.Process.User.AdditionalGids = slices.Compact(gids)
		return nil
	}
}

// capabilityOpts adds and drops capabilities relative to containerd's default set, in
// the CRI's order: ALL added, ALL dropped, then each named one added, then each named
// one dropped (so drop ALL + add NET_BIND_SERVICE leaves just that one). Names may
// carry the CAP_ prefix or not, in any case. ALL means every capability staticpod
// holds (held), as the CRI does; a named capability staticpod lacks is refused here,
// since runc could not grant it.
func capabilityOpts(name string, caps *corev1.Capabilities, held func() ([]string, error)) ([]oci.SpecOpts, error) {
	if caps == nil {
		return nil, nil
	}
	add, addAll, err := capNames(name, caps.Add)
	if err != nil {
		return nil, err
	}
	drop, dropAll, err := capNames(name, caps.Drop)
	if err != nil {
		return nil, err
	}
	if len(add) > 0 || addAll {
		if err := checkHeld(name, add, held); err != nil {
			return nil, err
		}
	}
	var opts []oci.SpecOpts
	if addAll {
		opts = append(opts, oci.WithAllCurrentCapabilities)
	}
	if dropAll {
		opts = append(opts, oci.WithCapabilities(nil))
	}
	return append(opts, oci.WithAddedCapabilities(add), oci.WithDroppedCapabilities(drop)), nil
}

// capNames returns names as the runtime spells them (CAP_NET_ADMIN) and whether ALL
// is among them; a name no kernel defines is a configuration error.
func capNames(name string, in []corev1.Capability) (out []string, all bool, err error) {
	known := cap.Known()
	for _, c := range in {
		n := strings.ToUpper(string(c))
		if n == capAll {
			all = true
			continue
		}
		if !strings.HasPrefix(n, capPrefix) {
			n = capPrefix + n
		}
		if !slices.Contains(known, n) {
			return nil, false, fmt.Errorf("%w: container %q: securityContext.capabilities: unknown capability %q", runner.ErrCreateConfig, name, string(c))
		}
		out = append(out, n)
	}
	return out, all, nil
}

// checkHeld refuses capabilities that staticpod itself does not hold: runc, started
// with staticpod's capabilities, would fail to start the container.
func checkHeld(name string, add []string, held func() ([]string, error)) error {
	have, err := held()
	if err != nil {
		return fmt.Errorf("container %q: read own capabilities: %w", name, err)
	}
	for _, c := range add {
		if !slices.Contains(have, c) {
			return fmt.Errorf("%w: container %q: securityContext.capabilities.add: %s is not held by staticpod, so no container can have it", runner.ErrCreateConfig, name, c)
		}
	}
	return nil
}

// currentCapabilities are staticpod's effective capabilities.
func currentCapabilities() ([]string, error) { return cap.Current() }
