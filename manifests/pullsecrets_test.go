package manifests

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const pullSecretsManifest = `apiVersion: v1
kind: Secret
metadata: {name: regcred}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths": {"registry.example.com": {"auth": "dXNlcjpwYXNz"}}}'
---
apiVersion: v1
kind: Secret
metadata: {name: legacy}
type: kubernetes.io/dockercfg
stringData:
  .dockercfg: '{"registry.example.com": {"username": "user", "password": "pass"}}'
---
apiVersion: v1
kind: Secret
metadata: {name: plain}
stringData: {password: pass}
---
apiVersion: v1
kind: Secret
metadata: {name: regcred, namespace: other}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths": {}}'
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  imagePullSecrets: [{name: legacy}, {name: plain}, {name: ""}, {name: gone}, {name: regcred}, {name: legacy}]
  containers: [{name: c, image: registry.example.com/app:1}]
`

// TestPullSecretsFindsThemBesideThePod: the pod's pull secrets are those of its
// namespace, in its order, each once; a missing name and a Secret of another type are
// told apart, and an empty name is passed over.
func TestPullSecretsFindsThemBesideThePod(t *testing.T) {
	res := Load([]byte(pullSecretsManifest), Options{NodeName: "n", Source: Source{Kind: SourceFile, Location: "web.yaml"}})
	if len(res.Errors) > 0 || len(res.Pods) != 1 {
		t.Fatalf("Load = %d pods, errors %v; want the pod and no error", len(res.Pods), res.Errors)
	}
	secrets, missing, unusable := PullSecrets(res.Pods[0], res.Objects())
	var names []string
	for _, s := range secrets {
		names = append(names, s.Namespace+"/"+s.Name+" "+string(s.Type))
	}
	want := []string{"default/legacy kubernetes.io/dockercfg", "default/regcred kubernetes.io/dockerconfigjson"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("PullSecrets secrets (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gone"}, missing); diff != "" {
		t.Errorf("PullSecrets missing (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"plain"}, unusable); diff != "" {
		t.Errorf("PullSecrets unusable (-want +got):\n%s", diff)
	}
}

// TestPullSecretThatIsNotJSONIsRefused: as the apiserver does, a pull secret's config
// must be a JSON object; the error names the key and quotes nothing of the value.
func TestPullSecretThatIsNotJSONIsRefused(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: v1\nkind: Secret\nmetadata: {name: regcred}\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: 'hunter2'\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: regcred}\ntype: kubernetes.io/dockercfg\nstringData:\n  .dockercfg: '[\"hunter2\"]'\n",
	} {
		res := Load([]byte(doc), Options{NodeName: "n", Source: Source{Kind: SourceFile, Location: "regcred.yaml"}})
		if len(res.Errors) != 1 {
			t.Fatalf("Load(%q) errors = %v, want one", doc, res.Errors)
		}
		msg := res.Errors[0].Error()
		if strings.Contains(msg, "hunter2") || !strings.Contains(msg, "data[.docker") || !strings.Contains(msg, "JSON object") {
			t.Errorf("Load(%q) = %q, want an error at the key that quotes nothing of the value", doc, msg)
		}
	}
}
