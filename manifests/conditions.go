package manifests

import corev1 "k8s.io/api/core/v1"

// ConditionTrue reports whether the pod's condition t (Ready, Initialized, …) is true
// in st: the one reading of a status that the runner's rollbacks, the API's metrics and
// the commands share.
func ConditionTrue(st corev1.PodStatus, t corev1.PodConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
