package manifests

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const refsPod = `apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  containers:
  - name: app
    image: busybox
    envFrom:
    - configMapRef: {name: optional-env, optional: true}
    env:
    - name: A
      valueFrom: {configMapKeyRef: {name: cfg, key: a}}
    - name: B
      valueFrom: {secretKeyRef: {name: creds, key: b, optional: true}}
  volumes:
  - name: cfg
    configMap:
      name: cfg
      items: [{key: a, path: a}, {key: z, path: z}]
  - name: all
    projected:
      sources:
      - secret: {name: creds}
      - configMap: {name: elsewhere, optional: true}
`

func TestReferencesFindWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objects string
		want    []string
	}{
		{"nothing defined", "", []string{
			`spec.volumes[0].configMap.name: Not found: "cfg"`,
			`spec.volumes[1].projected.sources[0].secret.name: Not found: "creds"`,
			`spec.containers[0].env[0].valueFrom.configMapKeyRef.name: Not found: "cfg"`,
		}},
		{"a key missing", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: '1'}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: creds}\n", []string{
			`spec.volumes[0].configMap.items[1].key: Not found: "z"`,
		}},
		{"in another namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: other}\ndata: {a: '1', z: '2'}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: creds}\n", []string{
			`spec.volumes[0].configMap.name: Not found: "cfg"`,
			`spec.containers[0].env[0].valueFrom.configMapKeyRef.name: Not found: "cfg"`,
		}},
		{"everything there", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: '1', z: '2'}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: creds}\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Load([]byte(refsPod+"---\n"+tc.objects), Options{NodeName: "n", Source: Source{Kind: SourceFile, Location: "app.yaml"}})
			if len(res.Errors) > 0 || len(res.Pods) != 1 {
				t.Fatalf("Load = %v, %d pods", res.Errors, len(res.Pods))
			}
			var got []string
			for _, e := range References(res.Pods[0], res.Objects()) {
				msg := e.Error()
				got = append(got, msg[:strings.Index(msg, `":`)+1])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("References (-want +got):\n%s", diff)
			}
			res.CheckReferences(res.Objects())
			if len(tc.want) > 0 && (len(res.Pods) != 0 || len(res.Errors) != len(tc.want) || res.Errors[0].Doc != 1 || res.Errors[0].Location != "app.yaml") {
				t.Errorf("CheckReferences left %d pods and errors %v, want the pod moved to located errors", len(res.Pods), res.Errors)
			}
		})
	}
}

func TestLoadObjects(t *testing.T) {
	in := `apiVersion: v1
kind: Secret
metadata: {name: creds}
data: {user: YWRtaW4=}
stringData: {password: s3cret, user: root}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: bad}
data: {"a/b": x}
binaryData: {c: eA==}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: dup}
data: {c: x}
binaryData: {c: eA==}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
---
apiVersion: v1
kind: Secret
metadata: {name: tls}
type: kubernetes.io/tls
stringData: {tls.crt: x}
`
	res := Load([]byte(in), Options{NodeName: "n", Source: Source{Kind: SourceFile, Location: "objs.yaml"}})
	var errs []string
	for _, e := range res.Errors {
		errs = append(errs, e.Error())
	}
	want := []string{
		`objs.yaml (document 2): data[a/b]: Invalid value: "a/b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
		`objs.yaml (document 3): binaryData[c]: Invalid value: "c": duplicate of key present in data`,
		`objs.yaml (document 4): metadata.name: Duplicate value: "creds"`,
		`objs.yaml (document 5): data[tls.key]: Required value: a Secret of type kubernetes.io/tls needs it`,
	}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("Load errors (-want +got):\n%s", diff)
	}
	if len(res.Secrets) != 1 {
		t.Fatalf("Load = %d secrets, want 1", len(res.Secrets))
	}
	s := res.Secrets[0]
	got := map[string]string{}
	for k, v := range s.Data {
		got[k] = string(v)
	}
	if diff := cmp.Diff(map[string]string{"user": "root", "password": "s3cret"}, got); diff != "" || s.Namespace != "default" || s.Type != "Opaque" || s.StringData != nil {
		t.Errorf("Secret defaulted to %s/%s type %s stringData %v, data (-want +got):\n%s", s.Namespace, s.Name, s.Type, s.StringData, diff)
	}
}

func TestObjectsFingerprintFollowsContent(t *testing.T) {
	load := func(value string) Objects {
		res := Load([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: "+value+"}\n"), Options{NodeName: "n"})
		return res.Objects()
	}
	if a, again := load("a"), load("a"); a.Fingerprint() != again.Fingerprint() {
		t.Error("equal objects have different fingerprints")
	}
	if load("a").Fingerprint() == load("b").Fingerprint() {
		t.Error("a changed value keeps the fingerprint")
	}
	if NewObjects().Fingerprint() != "" {
		t.Error("no objects have a fingerprint")
	}
}
