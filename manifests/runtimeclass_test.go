package manifests

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const rcPod = `apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  runtimeClassName: light
  containers:
  - name: app
    image: busybox
    resources: {limits: {cpu: 500m, memory: 64Mi}}
`

const rcLight = `apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: light}
handler: crun
overhead: {podFixed: {cpu: 250m, memory: 16Mi}}
`

func loadRC(t *testing.T, data string) Result {
	t.Helper()
	res := Load([]byte(data), Options{NodeName: "n", Source: Source{Kind: SourceFile, Location: "app.yaml"}})
	res.CheckReferences(res.Objects())
	return res
}

func TestRuntimeClassGivesHandlerAndOverhead(t *testing.T) {
	for _, tc := range []struct {
		name         string
		data         string
		wantHandler  string
		wantOverhead string // PodLimits as cpu,memory
	}{
		{"through a RuntimeClass", rcPod + "---\n" + rcLight, "crun", "750m,80Mi"},
		{"a handler named directly", rcPod, "light", "500m,64Mi"},
		{"in a List", "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSpace(rcLight), "\n", "\n  ") + "\n---\n" + rcPod, "crun", "750m,80Mi"},
		{"an overhead the RuntimeClass sets too", strings.Replace(rcPod, "  containers:", "  overhead: {cpu: 250m, memory: 16Mi}\n  containers:", 1) + "---\n" + rcLight, "crun", "750m,80Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := loadRC(t, tc.data)
			if len(res.Errors) > 0 || len(res.Pods) != 1 {
				t.Fatalf("Load = %v, %d pods", res.Errors, len(res.Pods))
			}
			pod := res.Pods[0]
			if h, _ := RuntimeHandler(pod, res.Objects()); h != tc.wantHandler {
				t.Errorf("RuntimeHandler = %q, want %q", h, tc.wantHandler)
			}
			l := PodLimits(pod)
			if got := l.Cpu().String() + "," + l.Memory().String(); got != tc.wantOverhead {
				t.Errorf("PodLimits = %s, want %s", got, tc.wantOverhead)
			}
		})
	}
}

func TestPodRequestsCountTheOverhead(t *testing.T) {
	res := loadRC(t, rcPod+"---\n"+rcLight)
	got := PodRequests(res.Pods[0])
	if diff := cmp.Diff("750m,80Mi", got.Cpu().String()+","+got.Memory().String()); diff != "" {
		t.Errorf("PodRequests (-want +got):\n%s", diff)
	}
}

func TestRuntimeClassRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want string
	}{
		{"an overhead without its RuntimeClass", strings.Replace(rcPod, "  containers:", "  overhead: {cpu: 250m}\n  containers:", 1),
			`app.yaml: spec.overhead: Forbidden: no RuntimeClass light is defined beside the pod (in its source) to set it; ` + msgOverhead},
		{"an overhead that differs", strings.Replace(rcPod, "  containers:", "  overhead: {cpu: 1}\n  containers:", 1) + "---\n" + rcLight,
			`app.yaml (document 1): spec.overhead: Forbidden: it does not match the overhead.podFixed of RuntimeClass light (cpu=250m, memory=16Mi); ` + msgOverhead},
		{"a handler that is no DNS label", rcPod + "---\n" + strings.Replace(rcLight, "handler: crun", "handler: Crun.v2", 1),
			`app.yaml (document 2): handler: Invalid value: "Crun.v2": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"a RuntimeClass of the wrong version", rcPod + "---\n" + strings.Replace(rcLight, "node.k8s.io/v1", "v1", 1),
			`app.yaml (document 2): apiVersion: Unsupported value: "v1": supported values: "node.k8s.io/v1"`},
		{"a namespaced RuntimeClass", rcPod + "---\n" + strings.Replace(rcLight, "{name: light}", "{name: light, namespace: default}", 1),
			`app.yaml (document 2): metadata.namespace: Forbidden: not allowed on this type: a RuntimeClass is not namespaced`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := loadRC(t, tc.data)
			var got []string
			for _, p := range res.Errors {
				got = append(got, p.Error())
			}
			if !cmp.Equal(got, []string{tc.want}) {
				t.Errorf("errors =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
