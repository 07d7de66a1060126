package manifests

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	sysctlSegment    = `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`
	sysctlMaxLength  = 253
	maxAppArmorPath  = 4095 // PATH_MAX - 1
	capSysAdmin      = "CAP_SYS_ADMIN"
	msgHostUsersOnly = "when `hostUsers` is false"
)

var (
	// seLinuxLevel is an MLS/MCS level as containerd's CRI accepts it: containerd fails
	// to create a container whose level does not match, SELinux enabled or not.
	seLinuxLevel = regexp.MustCompile(`^s\d(-s\d)??(:c\d{1,4}(\.c\d{1,4})?(,c\d{1,4}(\.c\d{1,4})?)*)?$`)

	sysctlName = regexp.MustCompile(`^(` + sysctlSegment + `[\./])*` + sysctlSegment + `$`)

	// ipcSysctls are the sysctls of the IPC namespace; those under net. belong to the
	// network namespace. Both are the host's own when the pod shares that namespace.
	ipcSysctls = []string{"kernel.sem", "kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced", "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni"}

	seccompTypes         = []corev1.SeccompProfileType{corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined}
	appArmorTypes        = []corev1.AppArmorProfileType{corev1.AppArmorProfileTypeLocalhost, corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined}
	procMounts           = []corev1.ProcMountType{corev1.DefaultProcMount, corev1.UnmaskedProcMount}
	fsGroupPolicies      = []corev1.PodFSGroupChangePolicy{corev1.FSGroupChangeOnRootMismatch, corev1.FSGroupChangeAlways}
	supplementalPolicies = []corev1.SupplementalGroupsPolicy{corev1.SupplementalGroupsPolicyMerge, corev1.SupplementalGroupsPolicyStrict}
	seLinuxPolicies      = []corev1.PodSELinuxChangePolicy{corev1.SELinuxChangePolicyRecursive, corev1.SELinuxChangePolicyMountOption}
)

// validatePodSecurity checks the host namespaces a pod shares and its securityContext.
func validatePodSecurity(spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace && spec.HostPID {
		errs = append(errs, field.Invalid(fld.Child("shareProcessNamespace"), true, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	if !hostUsers(spec) {
		for _, ns := range []struct {
			name   string
			shared bool
		}{{"hostNetwork", spec.HostNetwork}, {"hostPID", spec.HostPID}, {"hostIPC", spec.HostIPC}} {
			if ns.shared {
				errs = append(errs, field.Forbidden(fld.Child(ns.name), msgHostUsersOnly))
			}
		}
	}
	sc := spec.SecurityContext
	if sc == nil {
		return errs
	}
	p := fld.Child("securityContext")
	errs = append(errs, validateIDs(sc.RunAsUser, sc.RunAsGroup, p)...)
	if sc.FSGroup != nil {
		errs = append(errs, invalidMsgs(p.Child("fsGroup"), *sc.FSGroup, validation.IsValidGroupID(*sc.FSGroup))...)
	}
	for i, gid := range sc.SupplementalGroups {
		errs = append(errs, invalidMsgs(p.Child("supplementalGroups").Index(i), gid, validation.IsValidGroupID(gid))...)
	}
	errs = append(errs, validateSysctls(sc.Sysctls, spec, p.Child("sysctls"))...)
	if sc.FSGroupChangePolicy != nil {
		errs = append(errs, enum(p.Child("fsGroupChangePolicy"), *sc.FSGroupChangePolicy, fsGroupPolicies)...)
	}
	if sc.SupplementalGroupsPolicy != nil {
		errs = append(errs, enum(p.Child("supplementalGroupsPolicy"), *sc.SupplementalGroupsPolicy, supplementalPolicies)...)
	}
	if sc.SELinuxChangePolicy != nil {
		errs = append(errs, enum(p.Child("seLinuxChangePolicy"), *sc.SELinuxChangePolicy, seLinuxPolicies)...)
	}
	errs = append(errs, validateSeccomp(sc.SeccompProfile, p.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmor(sc.AppArmorProfile, p.Child("appArmorProfile"))...)
	errs = append(errs, validateSELinux(sc.SELinuxOptions, p.Child("seLinuxOptions"))...)
	return errs
}

// validateSecurityContext checks a container's securityContext. hostUsers says whether
// the pod shares the host's user namespace, which rules out an unmasked /proc.
func validateSecurityContext(sc *corev1.SecurityContext, hostUsers bool, fld *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	errs := validateIDs(sc.RunAsUser, sc.RunAsGroup, fld)
	if pm := sc.ProcMount; pm != nil {
		errs = append(errs, enum(fld.Child("procMount"), *pm, procMounts)...)
		if *pm == corev1.UnmaskedProcMount && hostUsers {
			errs = append(errs, field.Invalid(fld.Child("procMount"), *pm, "`hostUsers` must be false to use `Unmasked`"))
		}
	}
	errs = append(errs, validateSeccomp(sc.SeccompProfile, fld.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmor(sc.AppArmorProfile, fld.Child("appArmorProfile"))...)
	errs = append(errs, validateSELinux(sc.SELinuxOptions, fld.Child("seLinuxOptions"))...)
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		return errs
	}
	escalation := fld.Child("allowPrivilegeEscalation")
	if sc.Privileged != nil && *sc.Privileged {
		errs = append(errs, field.Invalid(escalation, false, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
	}
	if sc.Capabilities != nil {
		for _, c := range sc.Capabilities.Add {
			if c == capSysAdmin {
				errs = append(errs, field.Invalid(escalation, false, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
			}
		}
	}
	return errs
}

func validateIDs(user, group *int64, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		errs = append(errs, invalidMsgs(fld.Child("runAsUser"), *user, validation.IsValidUserID(*user))...)
	}
	if group != nil {
		errs = append(errs, invalidMsgs(fld.Child("runAsGroup"), *group, validation.IsValidGroupID(*group))...)
	}
	return errs
}

// validateSeccomp checks a seccomp profile: a localhostProfile is needed by, and allowed
// only for, type Localhost, and must stay inside the kubelet's seccomp directory.
func validateSeccomp(sp *corev1.SeccompProfile, fld *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	errs := requiredEnum(fld.Child("type"), sp.Type, seccompTypes)
	switch {
	case sp.Type == corev1.SeccompProfileTypeLocalhost && sp.LocalhostProfile == nil:
		errs = append(errs, field.Required(fld.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
	case sp.Type == corev1.SeccompProfileTypeLocalhost:
		errs = append(errs, relativePath(fld.Child("localhostProfile"), *sp.LocalhostProfile)...)
	case sp.LocalhostProfile != nil:
		errs = append(errs, field.Invalid(fld.Child("localhostProfile"), *sp.LocalhostProfile, "can only be set when seccomp type is Localhost"))
	}
	return errs
}

func validateAppArmor(ap *corev1.AppArmorProfile, fld *field.Path) field.ErrorList {
	if ap == nil {
		return nil
	}
	errs := requiredEnum(fld.Child("type"), ap.Type, appArmorTypes)
	p := fld.Child("localhostProfile")
	switch {
	case ap.Type != corev1.AppArmorProfileTypeLocalhost:
		if ap.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(p, *ap.LocalhostProfile, "can only be set when AppArmor type is Localhost"))
		}
	case ap.LocalhostProfile == nil || *ap.LocalhostProfile == "":
		errs = append(errs, field.Required(p, "must be set when AppArmor type is Localhost"))
	case strings.TrimSpace(*ap.LocalhostProfile) != *ap.LocalhostProfile:
		errs = append(errs, field.Invalid(p, *ap.LocalhostProfile, "must not be padded with whitespace"))
	case len(*ap.LocalhostProfile) > maxAppArmorPath:
		errs = append(errs, field.TooLong(p, "", maxAppArmorPath))
	}
	return errs
}

// validateSELinux refuses a level that containerd would refuse to create the
// container with. The options themselves have no effect (see the field contract).
func validateSELinux(o *corev1.SELinuxOptions, fld *field.Path) field.ErrorList {
	if o == nil || o.Level == "" || seLinuxLevel.MatchString(o.Level) {
		return nil
	}
	return field.ErrorList{field.Invalid(fld.Child("level"), o.Level, "must be an SELinux level as containerd reads it: s0, s0-s0:c0.c1023, s0:c1,c2")}
}

// validateSysctls checks sysctl names, and that a pod does not set a namespaced sysctl
// of a namespace it shares with the host: that would change the host's own setting.
func validateSysctls(sysctls []corev1.Sysctl, spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, s := range sysctls {
		p := fld.Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(p, ""))
		case len(s.Name) > sysctlMaxLength || !sysctlName.MatchString(s.Name):
			errs = append(errs, field.Invalid(p, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlName)))
		case seen[s.Name]:
			errs = append(errs, field.Duplicate(p, s.Name))
		}
		seen[s.Name] = true
		name := SysctlName(s.Name)
		switch {
		case spec.HostNetwork && strings.HasPrefix(name, "net."):
			errs = append(errs, field.Invalid(p, s.Name, "may not be specified when 'hostNetwork' is true"))
		case spec.HostIPC && (strings.HasPrefix(name, "fs.mqueue.") || slices.Contains(ipcSysctls, name)):
			errs = append(errs, field.Invalid(p, s.Name, "may not be specified when 'hostIPC' is true"))
		}
	}
	return errs
}

// SysctlName is a sysctl's name with dots between its segments, as the kubelet hands
// sysctls on: a name whose first separator is a slash (net/ipv4/conf/eth0.100/rp_filter)
// has its slashes and dots swapped (net.ipv4.conf.eth0/100.rp_filter), as sysctl.d(5)
// reads it.
func SysctlName(name string) string {
	i := strings.IndexAny(name, "./")
	if i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
}
