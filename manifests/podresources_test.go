package manifests

import (
	"maps"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// rl is a ResourceList of cpu and memory; "" leaves one out.
func rl(cpu, mem string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}

// resPod is a pod with pod-level resources (nil for none) and containers with the
// given resources; init containers named "sidecar..." are sidecars.
func resPod(pod *corev1.ResourceRequirements, init map[string]corev1.ResourceRequirements, apps ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{}
	p.Spec.Resources = pod
	for _, name := range slices.Sorted(maps.Keys(init)) {
		c := corev1.Container{Name: name, Resources: init[name]}
		if strings.HasPrefix(name, "sidecar") {
			c.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
	for _, r := range apps {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "app", Resources: r})
	}
	return p
}

func lim(cpu, mem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Limits: rl(cpu, mem)}
}
func req(cpu, mem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: rl(cpu, mem)}
}

func reqLim(reqCPU, reqMem, limCPU, limMem string) *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{Requests: rl(reqCPU, reqMem), Limits: rl(limCPU, limMem)}
}

// sameResources compares lists by value: 1000m and 1 are the same CPU.
func sameResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if o, ok := b[name]; !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

// The kubelet's pod cgroup limits (ResourceConfigForPod with PodLevelResources): the
// pod-level limit decides where set; else the containers' aggregate, when each of
// them is limited.
func TestPodLimitsWithPodResources(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.ResourceList
	}{
		{"pod limits, containers without", resPod(reqLim("", "", "2", "1Gi"), nil, lim("", ""), lim("", "")), rl("2", "1Gi")},
		{"pod limits below the containers' sum", resPod(reqLim("", "", "1", "64Mi"), nil, lim("800m", "48Mi"), lim("800m", "48Mi")), rl("1", "64Mi")},
		{"pod memory limit, container cpu limits", resPod(reqLim("", "", "", "64Mi"), nil, lim("100m", ""), lim("200m", "")), rl("300m", "64Mi")},
		{"pod cpu limit, one container without memory limit", resPod(reqLim("", "", "1", ""), nil, lim("", "32Mi"), lim("", "")), rl("1", "")},
		{"pod requests only: containers decide", resPod(reqLim("1", "1Gi", "", ""), nil, lim("100m", "32Mi"), req("100m", "32Mi")), rl("", "")},
		{"pod requests only, every container limited", resPod(reqLim("1", "1Gi", "", ""), nil, lim("100m", "32Mi"), lim("200m", "16Mi")), rl("300m", "48Mi")},
		{"zero pod limit caps nothing", resPod(reqLim("", "", "0", ""), nil, lim("", "")), rl("", "")},
		{"no pod resources: sidecars run beside the containers", resPod(nil,
			map[string]corev1.ResourceRequirements{"init": lim("1", "64Mi"), "sidecar": lim("200m", "16Mi")}, lim("300m", "32Mi")), rl("1", "64Mi")},
		{"no pod resources: a sidecar before an init container counts with it", resPod(nil,
			map[string]corev1.ResourceRequirements{"sidecar": lim("500m", "16Mi"), "zinit": lim("400m", "8Mi")}, lim("100m", "8Mi")), rl("900m", "24Mi")},
	} {
		if got := PodLimits(tc.pod); !sameResources(got, tc.want) {
			t.Errorf("PodLimits(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPodRequestsWithPodResources(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.ResourceList
	}{
		{"pod requests decide", resPod(reqLim("2", "", "", ""), nil, req("100m", "32Mi"), req("100m", "32Mi")), rl("2", "64Mi")},
		{"containers' sum", resPod(nil, nil, req("100m", "32Mi"), req("200m", "")), rl("300m", "32Mi")},
		{"largest init container", resPod(nil, map[string]corev1.ResourceRequirements{"init": req("1", "")}, req("100m", "")), rl("1", "")},
	} {
		if got := PodRequests(tc.pod); !sameResources(got, tc.want) {
			t.Errorf("PodRequests(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A container without a limit of its own is held to the pod's (kuberuntime
// getCPULimit, getMemoryLimit; the downward API's defaultPodLimitsForDownwardAPI).
func TestContainerLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.ResourceList
	}{
		{"own limits kept", resPod(reqLim("", "", "2", "1Gi"), nil, lim("500m", "")), rl("500m", "1Gi")},
		{"pod limits fill in", resPod(reqLim("", "", "2", "1Gi"), nil, lim("", "")), rl("2", "1Gi")},
		{"no pod limits", resPod(reqLim("1", "", "", ""), nil, lim("", "32Mi")), rl("", "32Mi")},
		{"no pod resources", resPod(nil, nil, lim("", "")), rl("", "")},
	} {
		c := &tc.pod.Spec.Containers[0]
		before := c.Resources.Limits.DeepCopy()
		if got := ContainerLimits(tc.pod, c); !sameResources(got, tc.want) {
			t.Errorf("ContainerLimits(%s) = %v, want %v", tc.name, got, tc.want)
		}
		if !sameResources(c.Resources.Limits, before) {
			t.Errorf("ContainerLimits(%s) changed the container's limits to %v", tc.name, c.Resources.Limits)
		}
	}
}

// ComputePodQOS with pod-level resources: they alone decide the class.
func TestQOSClassWithPodResources(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"pod requests equal limits", resPod(reqLim("1", "1Gi", "1", "1Gi"), nil, req("", "")), corev1.PodQOSGuaranteed},
		{"pod requests equal limits, containers burstable", resPod(reqLim("1", "1Gi", "1", "1Gi"), nil, req("100m", "")), corev1.PodQOSGuaranteed},
		{"pod requests below limits", resPod(reqLim("1", "1Gi", "2", "1Gi"), nil, req("", "")), corev1.PodQOSBurstable},
		{"pod cpu only", resPod(reqLim("1", "", "1", ""), nil, req("", "")), corev1.PodQOSBurstable},
		{"pod requests only, containers guaranteed", resPod(reqLim("1", "1Gi", "", ""), nil, corev1.ResourceRequirements{Requests: rl("1", "1Gi"), Limits: rl("1", "1Gi")}), corev1.PodQOSBurstable},
		{"empty pod resources: containers decide", resPod(&corev1.ResourceRequirements{}, nil, corev1.ResourceRequirements{Requests: rl("1", "1Gi"), Limits: rl("1", "1Gi")}), corev1.PodQOSGuaranteed},
	} {
		if got := QOSClass(tc.pod); got != tc.want {
			t.Errorf("QOSClass(%s) = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// The apiserver's defaultPodRequests: with pod-level limits, a resource the pod does
// not request is requested at the containers' aggregate, or at the limit.
func TestDefaultPodRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.ResourceList // pod-level requests after Default
	}{
		{"limits only, containers request nothing", resPod(reqLim("", "", "2", "1Gi"), nil, req("", "")), rl("2", "1Gi")},
		{"containers' requests, then the limit", resPod(reqLim("", "", "2", "1Gi"), nil, req("300m", ""), lim("200m", "")), rl("500m", "1Gi")},
		{"explicit requests kept", resPod(reqLim("1", "", "2", "1Gi"), nil, req("300m", "")), rl("1", "1Gi")},
		{"requests only: nothing added", resPod(reqLim("1", "", "", ""), nil, req("", "32Mi")), rl("1", "")},
	} {
		pod := tc.pod.DeepCopy()
		Default(pod)
		if got := pod.Spec.Resources.Requests; !sameResources(got, tc.want) {
			t.Errorf("Default(%s): pod requests = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// validatePodResources: the apiserver's rules, each error at its field.
func TestValidatePodResources(t *testing.T) {
	withApps := func(pod *corev1.ResourceRequirements, apps ...corev1.ResourceRequirements) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Resources = pod
			for i, r := range apps {
				if i >= len(p.Spec.Containers) {
					p.Spec.Containers = append(p.Spec.Containers, validContainer("app"+string(rune('a'+i))))
				}
				p.Spec.Containers[i].Resources = r
			}
		}
	}
	both := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: rl(cpu, mem), Limits: rl(cpu, mem)}
	}
	runValidateCases(t, validPod, []validateCase{
		{"cpu and memory within the pod's", withApps(reqLim("1", "1Gi", "2", "2Gi"), both("500m", "512Mi"), req("500m", "512Mi")), nil},
		{"pod requests above limits", withApps(reqLim("2", "", "1", "")),
			[]fieldErr{errAt(tInvalid, "spec.resources.requests[cpu]")}},
		{"containers request more than the pod", withApps(reqLim("1", "1Gi", "", ""), req("600m", "1Gi"), req("600m", "1Mi")),
			[]fieldErr{errAt(tInvalid, "spec.resources.requests[cpu]"), errAt(tInvalid, "spec.resources.requests[memory]")}},
		{"a sidecar counts beside the containers", func(p *corev1.Pod) {
			withApps(reqLim("1", "", "", ""), req("600m", ""))(p)
			sc := validContainer("sidecar")
			sc.RestartPolicy, sc.Ports, sc.Resources = new(corev1.ContainerRestartPolicyAlways), nil, req("600m", "")
			p.Spec.InitContainers = []corev1.Container{sc}
		}, []fieldErr{errAt(tInvalid, "spec.resources.requests[cpu]")}},
		{"a resource the pod does not request is not compared", withApps(reqLim("1", "", "", ""), req("600m", "1Gi")), nil},
		{"a container limited beyond the pod", withApps(reqLim("", "", "1", "64Mi"), lim("2", "32Mi"), lim("", "128Mi")),
			[]fieldErr{errAt(tInvalid, "spec.containers[0].resources.limits[cpu]"), errAt(tInvalid, "spec.containers[1].resources.limits[memory]")}},
		{"huge pages refused", withApps(&corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("1"), "hugepages-2Mi": resource.MustParse("4Mi")}}),
			[]fieldErr{errAt(tForbidden, "spec.resources.limits[hugepages-2Mi]")}},
		{"only cpu, memory and huge pages", withApps(&corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}}),
			[]fieldErr{errAt(tNotSupported, "spec.resources.requests[example.com/gpu]"), errAt(tRequired, "spec.resources.limits[example.com/gpu]")}},
	})
}

// A pod-level limit that reaches the user names the file and the field, through Load.
func TestLoadPodResourcesErrorNamesField(t *testing.T) {
	res := Load([]byte(`apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  resources:
    limits: {memory: 64Mi}
  containers:
  - name: a
    image: busybox
    resources:
      limits: {memory: 128Mi}
`), Options{NodeName: "n", Source: Source{Kind: SourceFile, Location: "/etc/kubernetes/manifests/p.yaml"}})
	// The pod-level request defaults to the container's 128Mi, above the limit, too.
	want := map[string]string{
		"spec.containers[0].resources.limits[memory]": "must be less than or equal to pod limits of 64Mi",
		"spec.resources.requests[memory]":             "must be less than or equal to memory limit of 64Mi",
	}
	if len(res.Errors) != len(want) {
		t.Fatalf("Load errors = %v, want %d", res.Errors, len(want))
	}
	for _, e := range res.Errors {
		got, found := e.Error(), false
		for at, rule := range want {
			found = found || containsAll(got, "p.yaml", at, rule)
		}
		if !found {
			t.Errorf("Load error = %q, want the file, one of %v and its rule", got, want)
		}
	}
	if diff := gocmp.Diff(0, len(res.Pods)); diff != "" {
		t.Errorf("pods loaded (-want +got):\n%s", diff)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
