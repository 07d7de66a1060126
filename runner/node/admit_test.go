package node

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// camera is a node with labels of its own and a NoExecute taint.
func camera(t *testing.T) *corev1.Node {
	t.Helper()
	n, err := New(Config{
		Name:           "cam-7",
		Labels:         map[string]string{"disktype": "ssd", "site": "north", "cores": "4"},
		Taints:         []corev1.Taint{{Key: "dedicated", Value: "camera", Effect: corev1.TaintEffectNoExecute}, {Key: "soft", Effect: corev1.TaintEffectNoSchedule}},
		Capacity:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		SystemReserved: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		KubeReserved:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func required(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// tolerant tolerates the camera's NoExecute taint, so that only its affinity decides.
var tolerant = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "camera", Effect: corev1.TaintEffectNoExecute}}

func TestFitsMatchesSelectorsAffinityAndTaintsAsTheKubelet(t *testing.T) {
	refusedAffinity := &Refusal{Reason: "NodeAffinity", Message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"}
	refusedTaint := &Refusal{Reason: "TaintToleration", Message: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"}
	for _, tc := range []struct {
		name        string
		selector    map[string]string
		affinity    *corev1.Affinity
		tolerations []corev1.Toleration
		want        *Refusal
	}{
		{name: "nothing asked", want: nil},
		{name: "empty nodeSelector", selector: map[string]string{}},
		{name: "nodeSelector matches", selector: map[string]string{"disktype": "ssd"}},
		{name: "nodeSelector on a well-known label", selector: map[string]string{"kubernetes.io/hostname": "cam-7", "kubernetes.io/os": "linux"}},
		{name: "nodeSelector value differs", selector: map[string]string{"disktype": "hdd"}, want: refusedAffinity},
		{name: "nodeSelector label absent", selector: map[string]string{"gpu": "yes"}, want: refusedAffinity},
		{name: "In matches", affinity: required(expr("site", corev1.NodeSelectorOpIn, "south", "north"))},
		{name: "In misses", affinity: required(expr("site", corev1.NodeSelectorOpIn, "south")), want: refusedAffinity},
		{name: "NotIn matches", affinity: required(expr("site", corev1.NodeSelectorOpNotIn, "south"))},
		{name: "NotIn misses", affinity: required(expr("site", corev1.NodeSelectorOpNotIn, "north")), want: refusedAffinity},
		{name: "NotIn of an absent label matches", affinity: required(expr("gpu", corev1.NodeSelectorOpNotIn, "yes"))},
		{name: "Exists matches", affinity: required(expr("disktype", corev1.NodeSelectorOpExists))},
		{name: "Exists misses", affinity: required(expr("gpu", corev1.NodeSelectorOpExists)), want: refusedAffinity},
		{name: "DoesNotExist matches", affinity: required(expr("gpu", corev1.NodeSelectorOpDoesNotExist))},
		{name: "DoesNotExist misses", affinity: required(expr("site", corev1.NodeSelectorOpDoesNotExist)), want: refusedAffinity},
		{name: "Gt matches", affinity: required(expr("cores", corev1.NodeSelectorOpGt, "2"))},
		{name: "Gt misses", affinity: required(expr("cores", corev1.NodeSelectorOpGt, "4")), want: refusedAffinity},
		{name: "Lt matches", affinity: required(expr("cores", corev1.NodeSelectorOpLt, "8"))},
		{name: "Lt misses", affinity: required(expr("cores", corev1.NodeSelectorOpLt, "4")), want: refusedAffinity},
		{name: "Gt of a label that is no number", affinity: required(expr("site", corev1.NodeSelectorOpGt, "1")), want: refusedAffinity},
		{name: "terms are ORed", affinity: required(expr("site", corev1.NodeSelectorOpIn, "south"), expr("disktype", corev1.NodeSelectorOpIn, "ssd"))},
		{name: "expressions of a term are ANDed", affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "site", Operator: corev1.NodeSelectorOpIn, Values: []string{"north"}},
			{Key: "disktype", Operator: corev1.NodeSelectorOpIn, Values: []string{"hdd"}},
		}}), want: refusedAffinity},
		{name: "matchFields metadata.name matches", affinity: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"cam-7"}}}})},
		{name: "matchFields metadata.name misses", affinity: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"cam-7"}}}}), want: refusedAffinity},
		{name: "no terms match nothing", affinity: required(), want: refusedAffinity},
		{name: "an empty term matches nothing", affinity: required(corev1.NodeSelectorTerm{}), want: refusedAffinity},
		{name: "nodeSelector and affinity both must match", selector: map[string]string{"disktype": "hdd"},
			affinity: required(expr("site", corev1.NodeSelectorOpIn, "north")), want: refusedAffinity},
		{name: "affinity without required terms", affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: expr("gpu", corev1.NodeSelectorOpExists)}}}}},
		{name: "pod affinity has no effect", affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}},
		{name: "NoExecute taint not tolerated", tolerations: []corev1.Toleration{}, want: refusedTaint},
		{name: "toleration of another value", tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gate", Effect: corev1.TaintEffectNoExecute}}, want: refusedTaint},
		{name: "toleration Exists of the key", tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}},
		{name: "toleration of everything (a file pod's)", tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}},
		{name: "toleration of NoSchedule only", tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, want: refusedTaint},
		{name: "affinity is checked before taints", selector: map[string]string{"disktype": "hdd"}, tolerations: []corev1.Toleration{}, want: refusedAffinity},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: tc.selector, Affinity: tc.affinity, Tolerations: tolerant}}
		if tc.tolerations != nil {
			pod.Spec.Tolerations = tc.tolerations
		}
		if diff := cmp.Diff(tc.want, Fits(pod, camera(t))); diff != "" {
			t.Errorf("Fits(%s) (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestFitsNeedsNoTolerationWithoutNoExecuteTaints(t *testing.T) {
	n, err := New(Config{Name: "plain", Taints: []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}},
		Capacity: corev1.ResourceList{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := Fits(&corev1.Pod{}, n); got != nil {
		t.Errorf("Fits(no tolerations) = %+v, want nil: only NoExecute taints refuse", got)
	}
}

func TestLedgerRefusesWhatAllocatableCannotHoldUnlessCritical(t *testing.T) {
	pod := func(cpu, mem, class string) *corev1.Pod {
		r := corev1.ResourceList{}
		if cpu != "" {
			r[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			r[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: class,
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: r}}}}}
	}
	// camera: 1500m CPU and 768Mi allocatable.
	for _, tc := range []struct {
		name     string
		admitted []*corev1.Pod
		pod      *corev1.Pod
		want     *Refusal
	}{
		{name: "no requests", pod: pod("", "", "")},
		{name: "all that is allocatable", pod: pod("1500m", "768Mi", "")},
		{name: "more memory than allocatable", pod: pod("", "769Mi", ""),
			want: &Refusal{Reason: "OutOfmemory", Message: "Node didn't have enough resource: memory, requested: 806354944, used: 0, capacity: 805306368"}},
		{name: "more CPU than allocatable", pod: pod("1501m", "", ""),
			want: &Refusal{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 1501, used: 0, capacity: 1500"}},
		{name: "CPU is checked before memory", pod: pod("2", "1Gi", ""),
			want: &Refusal{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 2000, used: 0, capacity: 1500"}},
		{name: "what admitted pods request is used", admitted: []*corev1.Pod{pod("1", "512Mi", "")}, pod: pod("", "512Mi", ""),
			want: &Refusal{Reason: "OutOfmemory", Message: "Node didn't have enough resource: memory, requested: 536870912, used: 536870912, capacity: 805306368"}},
		{name: "what is left fits", admitted: []*corev1.Pod{pod("1", "512Mi", "")}, pod: pod("500m", "256Mi", "")},
		{name: "system-node-critical is admitted anyway", pod: pod("4", "4Gi", "system-node-critical")},
		{name: "system-cluster-critical is admitted anyway", pod: pod("4", "4Gi", "system-cluster-critical")},
		{name: "another class is not", pod: pod("", "4Gi", "high"),
			want: &Refusal{Reason: "OutOfmemory", Message: "Node didn't have enough resource: memory, requested: 4294967296, used: 0, capacity: 805306368"}},
	} {
		l := NewLedger(camera(t))
		for _, p := range tc.admitted {
			l.Add(p)
		}
		if diff := cmp.Diff(tc.want, l.Check(tc.pod)); diff != "" {
			t.Errorf("Check(%s) (-want +got):\n%s", tc.name, diff)
		}
	}
}
