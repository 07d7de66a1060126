package manifests

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits on spec.dnsConfig, as the apiserver sets them from what libc's resolver reads,
// and on spec.hostnameOverride, which must fit in a UTS hostname.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxHostnameOverride   = 64
)

// Messages shared by several checks, worded as the apiserver words them.
const (
	msgNegative    = "must be greater than or equal to 0"
	msgNotPositive = "must be greater than zero"
)

var (
	restartPolicies  = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	dnsPolicies      = []corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}
	preemptPolicies  = []corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}
	operatingSystems = []corev1.OSName{corev1.Linux, corev1.Windows}
)

// Validate checks a pod that has already been defaulted (see Default) with the rules the
// apiserver applies to a v1.Pod that matter on one node, plus the rules of static pods
// (validate_static.go). It returns every problem with its field path, never just the
// first.
//
// Scheduling fields (nodeSelector, affinity, tolerations, topologySpreadConstraints,
// schedulerName, priority) are accepted as they are: they mean nothing on one machine,
// and a manifest must stay one that a cluster accepts unchanged. Fields staticpod does
// not implement are refused (validate_refused.go); the field contract (contract*.go)
// classifies every field of a Pod.
func Validate(pod *corev1.Pod) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateMeta(&pod.ObjectMeta, field.NewPath("metadata"))
	errs = append(errs, validateSpec(&pod.Spec, spec)...)
	errs = append(errs, validateAppArmorAnnotations(pod, field.NewPath("metadata", "annotations"))...)
	errs = append(errs, validateCDIAnnotations(pod, field.NewPath("metadata", "annotations"))...)
	errs = append(errs, validateStatic(&pod.Spec, spec)...)
	errs = append(errs, validateRefused(&pod.Spec, spec)...)
	return errs
}

// validateMeta checks the metadata a static pod keeps. The name is checked as written:
// the caller checks that <name>-<node> is still a valid name.
func validateMeta(meta *metav1.ObjectMeta, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case meta.Name == "" && meta.GenerateName != "":
		errs = append(errs, field.Required(fld.Child("name"), "static pods need a fixed name; generateName is not supported"))
	case meta.Name == "":
		errs = append(errs, field.Required(fld.Child("name"), ""))
	default:
		errs = append(errs, invalidMsgs(fld.Child("name"), meta.Name, validation.IsDNS1123Subdomain(meta.Name))...)
	}
	errs = append(errs, dnsLabel(fld.Child("namespace"), meta.Namespace, true)...)
	errs = append(errs, validateUID(meta.UID, fld.Child("uid"))...)
	errs = append(errs, metavalidation.ValidateLabels(meta.Labels, fld.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(meta.Annotations, fld.Child("annotations"))...)
	if v, ok := meta.Annotations[AnnotationProgressDeadline]; ok {
		if n, err := strconv.ParseInt(v, 10, 32); err != nil || n <= 0 {
			errs = append(errs, field.Invalid(fld.Child("annotations").Key(AnnotationProgressDeadline), v, "must be a whole number of seconds above 0"))
		}
	}
	return errs
}

func validateSpec(spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	vols, errs := validateVolumes(spec.Volumes, fld.Child("volumes"))
	errs = append(errs, validateContainers(spec, vols, fld)...)
	errs = append(errs, validatePodSecurity(spec, fld)...)
	errs = append(errs, validateUserNamespace(spec, fld)...)
	errs = append(errs, validatePolicies(spec, fld)...)
	errs = append(errs, validateDNS(spec, fld)...)
	errs = append(errs, validateHostNames(spec, fld)...)
	errs = append(errs, validatePodResources(spec, fld)...)
	return errs
}

// validatePolicies checks the pod-wide policies: restart, termination, preemption, OS.
func validatePolicies(spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	errs := requiredEnum(fld.Child("restartPolicy"), spec.RestartPolicy, restartPolicies)
	gracePath := fld.Child("terminationGracePeriodSeconds")
	switch grace := spec.TerminationGracePeriodSeconds; {
	case grace == nil:
		errs = append(errs, field.Required(gracePath, ""))
	case *grace < 0:
		errs = append(errs, field.Invalid(gracePath, *grace, msgNegative))
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		errs = append(errs, field.Invalid(fld.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if p := spec.PreemptionPolicy; p != nil {
		errs = append(errs, requiredEnum(fld.Child("preemptionPolicy"), *p, preemptPolicies)...)
	}
	if spec.PriorityClassName != "" {
		errs = append(errs, invalidMsgs(fld.Child("priorityClassName"), spec.PriorityClassName, validation.IsDNS1123Subdomain(spec.PriorityClassName))...)
	}
	if spec.OS != nil {
		errs = append(errs, requiredEnum(fld.Child("os", "name"), spec.OS.Name, operatingSystems)...)
	}
	return errs
}

// validateDNS checks dnsPolicy and dnsConfig; None needs a dnsConfig with a nameserver.
func validateDNS(spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	errs := requiredEnum(fld.Child("dnsPolicy"), spec.DNSPolicy, dnsPolicies)
	cfgPath := fld.Child("dnsConfig")
	cfg := spec.DNSConfig
	if spec.DNSPolicy == corev1.DNSNone {
		if cfg == nil {
			return append(errs, field.Required(cfgPath, "must provide `dnsConfig` when `dnsPolicy` is None"))
		}
		if len(cfg.Nameservers) == 0 {
			errs = append(errs, field.Required(cfgPath.Child("nameservers"), "must provide at least one DNS nameserver when `dnsPolicy` is None"))
		}
	}
	if cfg == nil {
		return errs
	}
	if len(cfg.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(cfgPath.Child("nameservers"), cfg.Nameservers, fmt.Sprintf("must not have more than %d nameservers", maxDNSNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		errs = append(errs, validation.IsValidIP(cfgPath.Child("nameservers").Index(i), ns)...)
	}
	return append(errs, validateDNSSearches(cfg, cfgPath)...)
}

func validateDNSSearches(cfg *corev1.PodDNSConfig, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	searchPath := fld.Child("searches")
	if len(cfg.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(searchPath, cfg.Searches, fmt.Sprintf("must not have more than %d search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(cfg.Searches, " ")) > maxDNSSearchListChars {
		errs = append(errs, field.Invalid(searchPath, cfg.Searches, fmt.Sprintf("must not have more than %d characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, s := range cfg.Searches {
		if s == "." {
			continue // the root domain: search nothing beyond the name itself
		}
		s = strings.TrimSuffix(s, ".")
		errs = append(errs, invalidMsgs(searchPath.Index(i), s, validation.IsDNS1123SubdomainWithUnderscore(s))...)
	}
	for i, opt := range cfg.Options {
		if opt.Name == "" {
			errs = append(errs, field.Required(fld.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

// validateHostNames checks the names the pod gives itself and its /etc/hosts entries.
func validateHostNames(spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	errs := dnsLabel(fld.Child("hostname"), spec.Hostname, false)
	errs = append(errs, dnsLabel(fld.Child("subdomain"), spec.Subdomain, false)...)
	if spec.NodeName != "" {
		errs = append(errs, invalidMsgs(fld.Child("nodeName"), spec.NodeName, validation.IsDNS1123Subdomain(spec.NodeName))...)
	}
	if o := spec.HostnameOverride; o != nil {
		errs = append(errs, validateHostnameOverride(spec, *o, fld.Child("hostnameOverride"))...)
	}
	for i, alias := range spec.HostAliases {
		p := fld.Child("hostAliases").Index(i)
		errs = append(errs, validation.IsValidIP(p.Child("ip"), alias.IP)...)
		for j, name := range alias.Hostnames {
			errs = append(errs, invalidMsgs(p.Child("hostnames").Index(j), name, validation.IsDNS1123Subdomain(name))...)
		}
	}
	return errs
}

func validateHostnameOverride(spec *corev1.PodSpec, name string, fld *field.Path) field.ErrorList {
	errs := invalidMsgs(fld, name, validation.IsDNS1123Subdomain(name))
	if len(name) > maxHostnameOverride {
		errs = append(errs, field.TooLong(fld, "", maxHostnameOverride))
	}
	if spec.HostNetwork {
		errs = append(errs, field.Forbidden(fld, "may not be set when `hostNetwork` is true"))
	}
	if spec.SetHostnameAsFQDN != nil && *spec.SetHostnameAsFQDN {
		errs = append(errs, field.Forbidden(fld, "may not be set when `setHostnameAsFQDN` is true"))
	}
	return errs
}

// invalidMsgs turns the messages of an apimachinery Is* check into Invalid errors.
func invalidMsgs(fld *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(fld, value, msg))
	}
	return errs
}

// dnsLabel checks an RFC 1123 label; an empty one is an error only when required.
func dnsLabel(fld *field.Path, value string, required bool) field.ErrorList {
	if value == "" {
		if required {
			return field.ErrorList{field.Required(fld, "")}
		}
		return nil
	}
	return invalidMsgs(fld, value, validation.IsDNS1123Label(value))
}

// requiredEnum reports an empty value as Required and any other value not in valid as
// NotSupported.
func requiredEnum[T ~string](fld *field.Path, value T, valid []T) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	return enum(fld, value, valid)
}

// enum reports a value not in valid as NotSupported.
func enum[T ~string](fld *field.Path, value T, valid []T) field.ErrorList {
	if slices.Contains(valid, value) {
		return nil
	}
	return field.ErrorList{field.NotSupported(fld, value, valid)}
}

// atLeast reports value as Invalid when it is below lowest (0 or 1, as the field needs).
func atLeast(fld *field.Path, value, lowest int64) field.ErrorList {
	switch {
	case value >= lowest:
		return nil
	case lowest == 0:
		return field.ErrorList{field.Invalid(fld, value, msgNegative)}
	default:
		return field.ErrorList{field.Invalid(fld, value, msgNotPositive)}
	}
}
