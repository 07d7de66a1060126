package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/staticpod/staticpod/internal/testenv"
)

// TestOncePullsThroughMirrorAndWithPluginCredentials runs `staticpod once` on a pod whose
// registry does not exist but has a loopback mirror in --registry-config-dir's hosts.toml,
// and on a pod whose registry wants a password that only a credential provider plugin
// (--image-credential-provider-config and -bin-dir) gives.
func TestOncePullsThroughMirrorAndWithPluginCredentials(t *testing.T) {
	o := newOnceEnv(t)
	mirror := testenv.StartRegistry(t, "", "")
	mirror.Push(t, "app/mirrored:1", testenv.ImageOptions{})
	private := testenv.StartRegistry(t, "plugged", "p1ugin")
	privateRef := private.Push(t, "app/private:1", testenv.ImageOptions{})

	certsd := t.TempDir()
	mustWrite(t, filepath.Join(certsd, "upstream.invalid", "hosts.toml"), fmt.Sprintf(`
server = "https://upstream.invalid"

[host."http://%s"]
  capabilities = ["pull", "resolve"]
`, mirror.Host))
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "stub-provider"), "./containerdrt/images/testdata/credprovider")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the test plugin: %v\n%s", err, out)
	}
	providers := filepath.Join(t.TempDir(), "credential-providers.yaml")
	mustWrite(t, providers, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: stub-provider
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: [%q]
  defaultCacheDuration: 1m
  args: ["--user", "plugged"]
  env:
  - {name: STUB_PASSWORD, value: p1ugin}
  - {name: STUB_LOG, value: %q}
`, private.Host, filepath.Join(bin, "calls.log")))

	withImage := func(name, ref, script string) string {
		return strings.Replace(podManifest(name, "Never", script), "image: "+e2eImage, "image: "+ref, 1)
	}
	o.write("mirrored.yaml", withImage("mirrored", "upstream.invalid/app/mirrored:1", "echo pulled through the mirror"))
	o.write("private.yaml", withImage("private", privateRef, "echo pulled with credentials from a plugin"))
	out, _, code, ns := o.run("--registry-config-dir", certsd,
		"--image-credential-provider-config", providers, "--image-credential-provider-bin-dir", bin)
	if code != 0 {
		t.Fatalf("once: exit %d, want 0", code)
	}
	for _, want := range []string{"mirrored-node1/main | pulled through the mirror\n", "private-node1/main | pulled with credentials from a plugin\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("once's output lacks %q:\n%s", want, out)
		}
	}
	o.assertNothingLeft(ns)
}

// TestOncePullsWithPullSecretBesideThePod runs `staticpod once` on a pod whose registry
// wants a password that only a kubernetes.io/dockerconfigjson Secret in the same file
// gives, named by its imagePullSecrets beside a name that finds nothing: the missing one
// is warned of, the pull uses the Secret, and the password shows nowhere.
func TestOncePullsWithPullSecretBesideThePod(t *testing.T) {
	o := newOnceEnv(t)
	t.Setenv("HOME", t.TempDir()) // no credentials of the host's
	private := testenv.StartRegistry(t, "puller", "s3cret-pw")
	ref := private.Push(t, "app/private:1", testenv.ImageOptions{})
	auth := base64.StdEncoding.EncodeToString([]byte("puller:s3cret-pw"))
	pod := strings.Replace(podManifest("private", "Never", "echo pulled with the pull secret",
		"  imagePullSecrets: [{name: gone}, {name: regcred}]\n"), "image: "+e2eImage, "image: "+ref, 1)
	o.write("private.yaml", fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: regcred}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths": {%q: {"auth": %q}}}'
---
`, private.Host, auth)+pod)
	out, stderr, code, ns := o.run()
	if code != 0 {
		t.Fatalf("once: exit %d, want 0\n%s", code, stderr)
	}
	if want := "private-node1/main | pulled with the pull secret\n"; !strings.Contains(out, want) {
		t.Errorf("once's output lacks %q:\n%s", want, out)
	}
	if want := "Unable to retrieve some image pull secrets (gone)"; !strings.Contains(stderr, want) {
		t.Errorf("once's log lacks %q:\n%s", want, stderr)
	}
	if strings.Contains(out+stderr, "s3cret-pw") || strings.Contains(out+stderr, auth) {
		t.Errorf("the password shows in once's output or log:\n%s\n%s", out, stderr)
	}
	o.assertNothingLeft(ns)
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
