package node

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// kubeletLabels are the labels of the kubernetes.io and k8s.io namespaces that the
// kubelet lets --node-labels set; labelNamespaces are the namespaces (and their
// subdomains) it lets it set in full.
var (
	kubeletLabels = []string{
		corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
		corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
		corev1.LabelInstanceType, corev1.LabelInstanceTypeStable,
		corev1.LabelOSStable, corev1.LabelArchStable, "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
	}
	labelNamespaces = []string{"kubelet.kubernetes.io", "node.kubernetes.io"}
)

// ParseLabels parses --node-labels: key=value pairs separated by commas (the flag may
// be given several times), each a valid label. As the kubelet, it refuses a key of the
// kubernetes.io or k8s.io namespaces that the kubelet may not set.
func ParseLabels(values []string) (map[string]string, error) {
	labels := map[string]string{}
	var unknown []string
	for _, pair := range splitList(values) {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("--node-labels: %q is not key=value", pair)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("--node-labels: key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("--node-labels: value %q of %s: %s", v, k, strings.Join(errs, "; "))
		}
		if !kubeletMaySet(k) {
			unknown = append(unknown, k)
		}
		labels[k] = v
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("--node-labels: unknown 'kubernetes.io' or 'k8s.io' labels %v: a label of those namespaces must begin with an allowed prefix (%s) or be one of %s",
			unknown, strings.Join(labelNamespaces, ", "), strings.Join(kubeletLabels, ", "))
	}
	return labels, nil
}

// kubeletMaySet reports whether the kubelet lets --node-labels set the label key.
func kubeletMaySet(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	if !inNamespace(ns, "kubernetes.io") && !inNamespace(ns, "k8s.io") {
		return true
	}
	if slices.Contains(kubeletLabels, key) {
		return true
	}
	for _, allowed := range labelNamespaces {
		if inNamespace(ns, allowed) {
			return true
		}
	}
	return false
}

func inNamespace(ns, domain string) bool { return ns == domain || strings.HasSuffix(ns, "."+domain) }

// ParseTaints parses --register-with-taints: key=value:Effect or key:Effect, separated
// by commas, as the kubelet (and kubectl taint) spell a taint.
func ParseTaints(values []string) ([]corev1.Taint, error) {
	var taints []corev1.Taint
	for _, spec := range splitList(values) {
		kv, effect, ok := strings.Cut(spec, ":")
		if !ok {
			return nil, fmt.Errorf("--register-with-taints: %q is not key=value:Effect", spec)
		}
		key, value, _ := strings.Cut(kv, "=")
		t := corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("--register-with-taints: %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", spec, effect)
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("--register-with-taints: key %q: %s", key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return nil, fmt.Errorf("--register-with-taints: value %q of %s: %s", value, key, strings.Join(errs, "; "))
		}
		taints = append(taints, t)
	}
	return taints, nil
}

// ParseReserved parses --system-reserved or --kube-reserved (named flag): name=quantity
// pairs separated by commas, as the kubelet's "cpu=200m,memory=500Mi". staticpod
// reserves CPU and memory; the kubelet's ephemeral-storage and pid are refused, as
// staticpod admits no pod by them.
func ParseReserved(flag string, values []string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, pair := range splitList(values) {
		name, value, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("--%s: %q is not name=quantity", flag, pair)
		}
		if name != string(corev1.ResourceCPU) && name != string(corev1.ResourceMemory) {
			return nil, fmt.Errorf("--%s: %q: staticpod reserves cpu and memory only", flag, name)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("--%s: %s=%q: %w", flag, name, value, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("--%s: %s=%s: a reservation is not negative", flag, name, value)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// splitList splits the comma-separated values of a flag given once or several times,
// dropping empty items.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}
