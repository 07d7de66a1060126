package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/staticpod/staticpod/validate"
)

// Each set is checked on its own: several paths given at once load as one directory,
// where the pods that both sets name would conflict.
func TestValidateAcceptsControlPlaneManifests(t *testing.T) {
	for _, path := range []string{"testdata/manifests/valid", "examples"} {
		out, code := runStaticpod(t, "validate", "--hostname-override", "cp1", path)
		if code != 0 {
			t.Fatalf("validate %s: exit %d, want 0\n%s", path, code, out)
		}
		if !strings.Contains(out, "0 files invalid") {
			t.Errorf("validate %s: output lacks the summary:\n%s", path, out)
		}
	}
}

func TestValidateLocatesEveryError(t *testing.T) {
	out, code := runStaticpod(t, "validate", "testdata/manifests/invalid")
	if code != 1 {
		t.Fatalf("validate invalid manifests: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		`error: testdata/manifests/invalid/etcd-missing-volume.yaml: spec.containers[0].volumeMounts[1].name: Not found: "certs"`,
		`error: testdata/manifests/invalid/cdi-annotation.yaml: metadata.annotations[cdi.k8s.io/serial]: Invalid value: "/dev/ttyUSB0": want CDI device names, vendor.com/class=device`,
		`warning: testdata/manifests/invalid/etcd-missing-volume.yaml: spec.containers[0].imagePullPolcy: Unsupported value: unknown field`,
		`error: testdata/manifests/invalid/many-errors.yaml (document 2): spec.containers[0].ports[0].containerPort: Invalid value: 70000`,
		`error: testdata/manifests/invalid/many-errors.yaml (document 2): spec.restartPolicy: Unsupported value: "Sometimes"`,
		`error: testdata/manifests/invalid/many-errors.yaml (document 3): kind: Unsupported value: "Deployment"`,
		`error: testdata/manifests/invalid/needs-apiserver.yaml: spec.volumes[1].persistentVolumeClaim: Forbidden: persistentVolumeClaim volumes need an apiserver`,
		`error: testdata/manifests/invalid/missing-objects.yaml (document 2): spec.containers[0].env[0].valueFrom.configMapKeyRef.key: Not found: "greting": ConfigMap default/app-config has no such key`,
		`error: testdata/manifests/invalid/missing-objects.yaml (document 2): spec.volumes[0].secret.secretName: Not found: "app-creds"`,
		`error: testdata/manifests/invalid/podlist-bad-item.yaml: items[2].spec.containers[0].volumeMounts[0].name: Not found: "nope"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
}

func TestValidateStrict(t *testing.T) {
	dir := t.TempDir()
	manifest := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c, image: busybox:1.36, imagee: x}]}\n"
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runStaticpod(t, "validate", dir); code != 0 || !strings.Contains(out, "warning: ") {
		t.Errorf("validate with an unknown field: exit %d, want 0 and a warning\n%s", code, out)
	}
	if out, code := runStaticpod(t, "validate", "--strict", dir); code != 1 || !strings.Contains(out, "error: "+dir+"/web.yaml: spec.containers[0].imagee") {
		t.Errorf("validate --strict with an unknown field: exit %d, want 1 and a located error\n%s", code, out)
	}
}

func TestValidateConflict(t *testing.T) {
	dir := t.TempDir()
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c, image: busybox:1.36}]}\n"
	for _, name := range []string{"a.yaml", "b.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(pod), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, code := runStaticpod(t, "validate", "--hostname-override", "n", dir)
	if code != 1 || !strings.Contains(out, "b.yaml: pod default/web-n is already defined in "+dir+"/a.yaml") {
		t.Errorf("validate with one pod in two files: exit %d, want 1 and the conflict\n%s", code, out)
	}
}

// TestValidateReferencesAcrossFiles checks that a pod may read the objects of another
// file of its directory, or of another path given, and that a reference to what no file
// defines is located at its field path.
func TestValidateReferencesAcrossFiles(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n" +
		"    env:\n    - name: MODE\n      valueFrom: {configMapKeyRef: {name: web, key: mode}}\n" +
		"    - name: PASSWORD\n      valueFrom: {secretKeyRef: {name: creds, key: password}}\n"
	for path, content := range map[string]string{
		filepath.Join(dir, "web.yaml"):     pod,
		filepath.Join(dir, "config.yaml"):  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {mode: fast}\n",
		filepath.Join(other, "creds.yaml"): "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {password: s3cret}\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, code := runStaticpod(t, "validate", dir)
	want := "error: " + dir + "/web.yaml: spec.containers[0].env[1].valueFrom.secretKeyRef.name: Not found: \"creds\""
	if code != 1 || !strings.Contains(out, want) {
		t.Errorf("validate with a Secret no file defines: exit %d, want 1 and %q\n%s", code, want, out)
	}
	if out, code := runStaticpod(t, "validate", dir, other); code != 0 || !strings.Contains(out, "1 pod and 2 objects valid") {
		t.Errorf("validate with the Secret in another path: exit %d, want 0\n%s", code, out)
	}
}

func TestValidateJSON(t *testing.T) {
	out, code := runStaticpod(t, "validate", "-o", "json", "testdata/manifests/invalid/etcd-missing-volume.yaml")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	var report validate.Validation
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("validate -o json is not JSON: %v\n%s", err, out)
	}
	if report.Valid || len(report.Files) != 1 || len(report.Files[0].Errors) != 1 {
		t.Fatalf("report = %+v, want one invalid file with one error", report)
	}
	e := report.Files[0].Errors[0]
	if e.Field != "spec.containers[0].volumeMounts[1].name" || e.Document != 1 || e.Message != `Not found: "certs"` {
		t.Errorf("error = %+v", e)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"validate"},
		{"validate", "-o", "xml", "examples"},
		{"validate", "/does/not/exist"},
		{"validate", "--no-such-flag", "examples"},
		{"run", "--no-such-flag"},
		{"run", "--log-level", "loud"},
		{"run", "--manifest-url", "http://127.0.0.1:1/", "--manifest-url-header", "no-colon", "--containerd-address", "/nonexistent.sock"},
	} {
		if out, code := runStaticpod(t, args...); code != 2 {
			t.Errorf("staticpod %v: exit %d, want 2\n%s", args, code, out)
		}
	}
}

// validate reports what the restriction flags would refuse, as the daemon would for the
// file source, with the flag named; without the flags the same manifests are valid.
func TestValidateRestrictions(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"net.yaml":  "apiVersion: v1\nkind: Pod\nmetadata: {name: net}\nspec: {hostNetwork: true, containers: [{name: c, image: busybox:1.36}]}\n",
		"priv.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: priv}\nspec: {containers: [{name: c, image: busybox:1.36, securityContext: {privileged: true}}]}\n",
		"host.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: host}\nspec: {volumes: [{name: etc, hostPath: {path: /etc}}], containers: [{name: c, image: busybox:1.36}]}\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, code := runStaticpod(t, "validate", dir); code != 0 {
		t.Fatalf("validate without restrictions: exit %d, want 0\n%s", code, out)
	}
	out, code := runStaticpod(t, "validate", "--host-network-sources", "http,api", "--privileged-sources", "api",
		"--allowed-host-paths", "/srv", "--allowed-host-paths", "/var/lib/etcd", dir)
	if code != 1 {
		t.Fatalf("validate with restrictions: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		"error: " + dir + `/net.yaml: spec.hostNetwork: the host's network is not allowed for pods from source "file" (--host-network-sources)`,
		"error: " + dir + `/priv.yaml: spec.containers[0].securityContext.privileged: a privileged container is not allowed for pods from source "file" (--privileged-sources)`,
		"error: " + dir + `/host.yaml: spec.volumes[0].hostPath.path: host path /etc is outside --allowed-host-paths`,
		"3 files invalid",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	if out, code := runStaticpod(t, "validate", "--host-pid-sources", "apiserver", dir); code != 2 || !strings.Contains(out, `--host-pid-sources: unknown source "apiserver"`) {
		t.Errorf("validate with an unknown source: exit %d, want 2 and the flag named\n%s", code, out)
	}
}
