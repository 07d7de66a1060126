package manifests

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestDecode(t *testing.T) {
	const pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec: {containers: [{name: c, image: busybox}]}\n"
	podNamed := func(name string) string { return strings.Replace(pod, "%s", name, 1) }
	tests := []struct {
		name     string
		in       string
		pods     []string // names, in order
		docs     int
		errors   []string // Problem.Error() without location
		warnings []string
	}{
		{name: "empty file", in: "", docs: 0},
		{name: "comments only", in: "# nothing\n# here\n", docs: 1},
		{name: "separators only", in: "---\n---\n", docs: 1},
		{name: "one pod", in: podNamed("a"), pods: []string{"a"}, docs: 1},
		{name: "json pod", in: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"x"}]}}`, pods: []string{"j"}, docs: 1},
		{name: "multi document", in: podNamed("a") + "---\n# comment\n---\n" + podNamed("b"), pods: []string{"a", "b"}, docs: 3},
		{
			name: "pod list",
			in:   "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, image: x}]}\n- metadata: {name: b}\n  spec: {containers: [{name: c, image: x}]}\n",
			pods: []string{"a", "b"}, docs: 1,
		},
		{
			name:   "list with a service",
			in:     "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: s}}\n- " + strings.ReplaceAll(strings.TrimSpace(`{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: x}]}}`), "\n", " ") + "\n",
			pods:   []string{"p"},
			docs:   1,
			errors: []string{`items[0].kind: Unsupported value: "Service": supported values: "Pod", "ConfigMap", "Secret", "RuntimeClass"`},
		},
		{
			name:   "other kind",
			in:     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
			docs:   1,
			errors: []string{`kind: Unsupported value: "Deployment": supported values: "Pod", "PodList", "List", "ConfigMap", "Secret", "RuntimeClass"`},
		},
		{name: "no kind", in: "metadata: {name: x}\n", docs: 1, errors: []string{`kind: Required value: a static pod manifest needs "kind: Pod" (or PodList, List, ConfigMap, Secret, RuntimeClass)`}},
		{name: "no apiVersion", in: "kind: Pod\nmetadata: {name: x}\n", docs: 1, errors: []string{`apiVersion: Required value: a Pod needs "apiVersion: v1"`}},
		{name: "not a mapping", in: "- a\n- b\n", docs: 1, errors: []string{"Invalid value: a manifest document must be a mapping (an object) with apiVersion and kind, not a list"}},
		{name: "bad yaml", in: "kind: Pod\nmetadata: {name: [oops\n", docs: 1, errors: []string{"Invalid value: not valid YAML or JSON: line 2: did not find expected ',' or ']'"}},
		{
			name:     "unknown fields",
			in:       strings.Replace(podNamed("a"), "image: busybox", "image: busybox, imagee: x", 1) + "extra: 1\n",
			pods:     []string{"a"},
			docs:     1,
			warnings: []string{"extra: Unsupported value: unknown field, not part of a v1 Pod (a typo?)", "spec.containers[0].imagee: Unsupported value: unknown field, not part of a v1 Pod (a typo?)"},
		},
		{
			name:   "wrong type",
			in:     strings.Replace(podNamed("a"), "image: busybox", "image: busybox, ports: [{containerPort: x}]", 1),
			docs:   1,
			errors: []string{`spec.containers[0].ports[0].containerPort: Invalid value: "x": expected an integer`},
		},
		{name: "too large", in: strings.Repeat("#", MaxManifestBytes+1), errors: []string{"Invalid value: the manifest is 10485761 bytes; at most 10485760 are read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decode([]byte(tt.in))
			var pods []string
			for _, p := range d.Pods {
				pods = append(pods, p.Pod.Name)
			}
			if diff := cmp.Diff(tt.pods, pods); diff != "" {
				t.Errorf("Decode pods (-want +got):\n%s", diff)
			}
			if d.Documents != tt.docs {
				t.Errorf("Decode documents = %d, want %d", d.Documents, tt.docs)
			}
			if diff := cmp.Diff(tt.errors, messages(d.Errors)); diff != "" {
				t.Errorf("Decode errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.warnings, messages(d.Warnings)); diff != "" {
				t.Errorf("Decode warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeBadValues checks that a value that does not decode is reported at its field
// path, list indexes and map keys included, as validation errors are, and that every bad
// value of a document is reported, not only the first.
func TestDecodeBadValues(t *testing.T) {
	const quantityErr = `quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`
	pod := func(spec string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n" + spec
	}
	tests := []struct {
		name   string
		in     string
		pods   int      // the good pods beside the bad one
		errors []string // Problem.Error() without location
	}{
		{
			name:   "bad quantity in limits",
			in:     pod("  containers:\n  - name: c\n    image: x\n    resources:\n      limits:\n        memory: 12XB\n"),
			errors: []string{`spec.containers[0].resources.limits[memory]: Invalid value: "12XB": ` + quantityErr},
		},
		{
			name:   "bad quantity in requests",
			in:     pod("  containers: [{name: c, image: x, resources: {requests: {cpu: lots}}}]\n"),
			errors: []string{`spec.containers[0].resources.requests[cpu]: Invalid value: "lots": ` + quantityErr},
		},
		{
			name:   "list for a quantity",
			in:     pod("  containers: [{name: c, image: x, resources: {requests: {cpu: [1]}}}]\n"),
			errors: []string{`spec.containers[0].resources.requests[cpu]: Invalid value: expected a quantity such as 500m or 1Gi, not a list`},
		},
		{
			name:   "string for an int",
			in:     pod("  terminationGracePeriodSeconds: x\n  containers: [{name: c, image: x}]\n"),
			errors: []string{`spec.terminationGracePeriodSeconds: Invalid value: "x": expected an integer`},
		},
		{
			name:   "int out of range",
			in:     pod("  containers: [{name: c, image: x, ports: [{containerPort: 99999999999}]}]\n"),
			errors: []string{`spec.containers[0].ports[0].containerPort: Invalid value: 99999999999: expected an integer from -2147483648 to 2147483647`},
		},
		{
			name:   "number for a string",
			in:     pod("  restartPolicy: 5\n  containers: [{name: c, image: x}]\n"),
			errors: []string{`spec.restartPolicy: Invalid value: 5: expected a string`},
		},
		{
			name:   "mapping for a string",
			in:     pod("  containers: [{name: c, image: {name: x}}]\n"),
			errors: []string{`spec.containers[0].image: Invalid value: expected a string, not a mapping`},
		},
		{
			name:   "string for a list",
			in:     pod("  containers: foo\n"),
			errors: []string{`spec.containers: Invalid value: "foo": expected a list`},
		},
		{
			name:   "string for an int-or-string",
			in:     pod("  containers: [{name: c, image: x, livenessProbe: {tcpSocket: {port: true}}}]\n"),
			errors: []string{`spec.containers[0].livenessProbe.tcpSocket.port: Invalid value: true: expected an integer or a string`},
		},
		{
			name:   "later list items",
			in:     pod("  containers:\n  - {name: a, image: x}\n  - {name: b, image: x, ports: [{containerPort: 80}, {containerPort: abc}]}\n"),
			errors: []string{`spec.containers[1].ports[1].containerPort: Invalid value: "abc": expected an integer`},
		},
		{
			name:   "init container",
			in:     pod("  initContainers: [{name: i, image: x, resources: {limits: {memory: 1XB}}}]\n  containers: [{name: c, image: x}]\n"),
			errors: []string{`spec.initContainers[0].resources.limits[memory]: Invalid value: "1XB": ` + quantityErr},
		},
		{
			name:   "metadata map",
			in:     "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {tier: [x]}}\nspec: {containers: [{name: c, image: x}]}\n",
			errors: []string{`metadata.labels[tier]: Invalid value: expected a string, not a list`},
		},
		{
			name: "every bad value",
			in:   pod("  restartPolicy: 5\n  containers: [{name: c, image: x, resources: {limits: {memory: 12XB}, requests: {memory: 1XB}}}]\n"),
			errors: []string{
				`spec.containers[0].resources.limits[memory]: Invalid value: "12XB": ` + quantityErr,
				`spec.containers[0].resources.requests[memory]: Invalid value: "1XB": ` + quantityErr,
				`spec.restartPolicy: Invalid value: 5: expected a string`,
			},
		},
		{
			name:   "pod list item",
			in:     "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, image: x}]}\n- metadata: {name: b}\n  spec: {containers: [{name: c, image: x, resources: {limits: {cpu: 1XB}}}]}\n",
			pods:   1,
			errors: []string{`items[1].spec.containers[0].resources.limits[cpu]: Invalid value: "1XB": ` + quantityErr},
		},
		{
			name:   "pod list item not a mapping",
			in:     "apiVersion: v1\nkind: PodList\nitems: [7]\n",
			errors: []string{`items[0]: Invalid value: 7: expected a mapping`},
		},
		{
			name:   "pod list items not a list",
			in:     "apiVersion: v1\nkind: PodList\nitems: foo\n",
			errors: []string{`items: Invalid value: "foo": expected a list`},
		},
		{
			name:   "kind not a string",
			in:     "apiVersion: v1\nkind: 5\n",
			errors: []string{`kind: Invalid value: 5: expected a string`},
		},
		{
			name:   "json",
			in:     `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"memory":"12XB"}}}]}}`,
			errors: []string{`spec.containers[0].resources.limits[memory]: Invalid value: "12XB": ` + quantityErr},
		},
		{
			name:   "json list item",
			in:     `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"x","ports":[{"containerPort":"http"}]}]}}]}`,
			errors: []string{`items[0].spec.containers[0].ports[0].containerPort: Invalid value: "http": expected an integer`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decode([]byte(tt.in))
			if len(d.Pods) != tt.pods {
				t.Errorf("Decode pods = %d, want %d", len(d.Pods), tt.pods)
			}
			if diff := cmp.Diff(tt.errors, messages(d.Errors)); diff != "" {
				t.Errorf("Decode errors (-want +got):\n%s", diff)
			}
		})
	}
}

func messages(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Error())
	}
	return out
}

func TestDecodeDocumentIndex(t *testing.T) {
	in := "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: x}]}\n---\nkind: Nope\n"
	d := Decode([]byte(in))
	if len(d.Errors) != 1 || d.Errors[0].Doc != 2 {
		t.Fatalf("Decode errors = %+v, want one in document 2", d.Errors)
	}
	if len(d.Pods) != 1 || d.Pods[0].Doc != 1 {
		t.Fatalf("Decode pods = %+v, want one from document 1", d.Pods)
	}
}

// A source reports at most MaxReported problems of a manifest, each of a bounded size,
// and says how many it left out.
func TestMessagesAreBounded(t *testing.T) {
	var ps []Problem
	for i := range MaxReported + 5 {
		ps = append(ps, Problem{Location: "x.yaml", Err: field.Invalid(field.NewPath("spec"), strings.Repeat("é", 2000), fmt.Sprint(i))})
	}
	got := Messages(ps)
	if len(got) != MaxReported+1 || got[MaxReported] != "x.yaml: 5 more problems not shown (staticpod validate lists them all)" {
		t.Fatalf("Messages gave %d lines, the last %q", len(got), got[len(got)-1])
	}
	for _, m := range got[:MaxReported] {
		if len(m) > maxReportedBytes+40 || !utf8.ValidString(m) || !strings.HasPrefix(m, "x.yaml: spec: ") || !strings.Contains(m, " bytes more)") {
			t.Errorf("a reported problem of %d bytes (valid UTF-8: %v): %.80q", len(m), utf8.ValidString(m), m)
		}
	}
}
