package e2e

import (
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
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "stub-provider"), "./containerdrt/testdata/credprovider")
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

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
