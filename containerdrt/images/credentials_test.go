package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/runner"
)

// TestEnsurePullsThroughHostsTomlMirror pulls an image of a registry that does not exist
// (upstream.invalid) through a mirror on loopback that only its hosts.toml names.
func TestEnsurePullsThroughHostsTomlMirror(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	mirror := startTestRegistry(t, "", "")
	mirror.push(t, "app/mirrored:1", imageOptionsFor(t, ""))
	certsd := t.TempDir()
	os.Mkdir(filepath.Join(certsd, "upstream.invalid"), 0o755)
	writeConfigFile(t, filepath.Join(certsd, "upstream.invalid", "hosts.toml"), fmt.Sprintf(`
server = "https://upstream.invalid"

[host."http://%s"]
  capabilities = ["pull", "resolve"]
`, mirror.host))

	const ref = "upstream.invalid/app/mirrored:1"
	_, err := newStore(d.Client, Config{}, pullLogger(t)).Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullAlways})
	if err == nil {
		t.Fatalf("ensure(%s) without hosts.toml succeeded, want a failure to reach upstream.invalid", ref)
	}
	img, err := newStore(d.Client, Config{RegistryConfigDir: certsd}, pullLogger(t)).Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullAlways})
	if err != nil {
		t.Fatalf("ensure(%s) through the mirror = %v", ref, err)
	}
	if img.Ref != ref {
		t.Errorf("Ensure(%s) = %+v, want the image named %s", ref, img, ref)
	}
	if got := mirror.take(); got.manifests == 0 || got.blobs == 0 {
		t.Errorf("mirror served %v, want the manifest and blob GETs of the pull", got.all)
	}
}

// TestEnsureUsesDockerCredentialHelper pulls from a registry that wants basic auth with
// the credentials a docker-credential-* helper gives, named by credHelpers for the
// registry's host and by credsStore for every registry.
func TestEnsureUsesDockerCredentialHelper(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	t.Setenv("HOME", t.TempDir()) // no credentials of the host's
	reg := startTestRegistry(t, "helped", "h3lper")
	ref := reg.push(t, "private/helped:1", imageOptionsFor(t, ""))
	bin := t.TempDir()
	mustBuildTestProgram(t, "credhelper", filepath.Join(bin, "docker-credential-stub"))
	writeConfigFile(t, filepath.Join(bin, "creds.json"), fmt.Sprintf(`{%q: {"Username": "helped", "Secret": "h3lper"}}`, reg.host))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	for name, config := range map[string]string{
		"credHelpers": fmt.Sprintf(`{"credHelpers": {%q: "stub"}, "auths": {%q: {"username": "helped", "password": "wrong"}}}`, reg.host, reg.host),
		"credsStore":  `{"credsStore": "stub"}`,
	} {
		path := filepath.Join(t.TempDir(), "config.json")
		writeConfigFile(t, path, config)
		os.Remove(filepath.Join(bin, "calls.log"))
		img, err := newStore(d.Client, Config{RegistryConfig: path}, pullLogger(t)).Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullAlways})
		if err != nil || img.Ref != ref {
			t.Errorf("ensure with %s = %+v, %v, want %s pulled", name, img, err, ref)
		}
		if calls, _ := os.ReadFile(filepath.Join(bin, "calls.log")); !strings.Contains(string(calls), reg.host+"\n") {
			t.Errorf("helper was asked about %q, want %s", calls, reg.host)
		}
	}

	// A helper that has nothing for the host leaves the file's auths entry in force.
	writeConfigFile(t, filepath.Join(bin, "creds.json"), `{}`)
	path := filepath.Join(t.TempDir(), "config.json")
	writeConfigFile(t, path, fmt.Sprintf(`{"credsStore": "stub", "auths": {%q: {"username": "helped", "password": "h3lper"}}}`, reg.host))
	if _, err := newStore(d.Client, Config{RegistryConfig: path}, pullLogger(t)).Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullAlways}); err != nil {
		t.Errorf("ensure with a helper that has nothing and an auths entry = %v", err)
	}
}

// TestEnsureUsesCredentialProviderPlugin pulls from a registry that wants basic auth with
// the credentials a kubelet credential provider plugin gives, and runs the plugin once
// while its answer is cached.
func TestEnsureUsesCredentialProviderPlugin(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	t.Setenv("HOME", t.TempDir())
	reg := startTestRegistry(t, "plugged", "p1ugin")
	ref := reg.push(t, "private/plugged:1", imageOptionsFor(t, ""))
	bin, dir := t.TempDir(), t.TempDir()
	mustBuildTestProgram(t, "credprovider", filepath.Join(bin, "stub-provider"))
	calls := filepath.Join(dir, "calls.log")
	config := filepath.Join(dir, "credential-providers.yaml")
	writeConfigFile(t, config, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: stub-provider
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["*.example.com", %q]
  defaultCacheDuration: 10m
  args: ["--user", "plugged"]
  env:
  - {name: STUB_PASSWORD, value: p1ugin}
  - {name: STUB_LOG, value: %q}
`, reg.host, calls))
	providers, err := loadCredentialProviders(config, bin)
	if err != nil {
		t.Fatalf("loadCredentialProviders = %v", err)
	}
	imgs := newStore(d.Client, Config{}, pullLogger(t))
	imgs.providers = providers

	for range 2 {
		if img, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullAlways}); err != nil || img.Ref != ref {
			t.Fatalf("ensure = %+v, %v, want %s pulled", img, err, ref)
		}
	}
	got, _ := os.ReadFile(calls)
	if want := reg.host + "/private/plugged\n"; string(got) != want {
		t.Errorf("plugin was run for %q, want once for %q (the repository, then its cached answer)", got, want)
	}
}

func TestLoadCredentialProvidersRejectsBadConfig(t *testing.T) {
	bin := t.TempDir()
	writeConfigFile(t, filepath.Join(bin, "present"), "#!/bin/sh\n")
	os.Chmod(filepath.Join(bin, "present"), 0o755)
	for name, tc := range map[string]struct{ config, want string }{
		"wrong kind": {`{"apiVersion": "kubelet.config.k8s.io/v1", "kind": "KubeletConfiguration"}`, "want kind CredentialProviderConfig"},
		"unknown field": {`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers: [{name: present, apiVersion: credentialprovider.kubelet.k8s.io/v1, matchImages: [a.io], defaultCacheDuration: 1m, cacheDuration: 1m}]`, `unknown field "cacheDuration"`},
		"every problem": {`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- {name: a/b, apiVersion: v1, matchImages: []}
- {name: present, apiVersion: credentialprovider.kubelet.k8s.io/v1beta1, matchImages: ["%zz"], defaultCacheDuration: -1m, tokenAttributes: {serviceAccountTokenAudience: x}}`,
			"providers[0].name: \"a/b\" is not a file name\nproviders[0].apiVersion: \"v1\" is not one of credentialprovider.kubelet.k8s.io/v1, credentialprovider.kubelet.k8s.io/v1beta1, credentialprovider.kubelet.k8s.io/v1alpha1\nproviders[0].matchImages: at least one image pattern is required\nproviders[0].defaultCacheDuration: required\nproviders[1].matchImages[0]: parse"},
		"missing binary": {`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers: [{name: absent, apiVersion: credentialprovider.kubelet.k8s.io/v1, matchImages: [a.io], defaultCacheDuration: 1m}]`, "credential provider absent:"},
	} {
		config := filepath.Join(t.TempDir(), "config.yaml")
		writeConfigFile(t, config, tc.config)
		_, err := loadCredentialProviders(config, bin)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: loadCredentialProviders = %v, want an error containing %q", name, err, tc.want)
		}
	}
	if _, err := loadCredentialProviders(filepath.Join(bin, "config.yaml"), ""); err == nil {
		t.Errorf("loadCredentialProviders without a bin dir = nil, want an error")
	}
}

func TestImageMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, repo string
		want          bool
	}{
		{"*.dkr.ecr.*.amazonaws.com", "123.dkr.ecr.eu-west-1.amazonaws.com/app", true},
		{"*.example.com", "reg.example.com/team/app", true},
		{"*.example.com", "example.com/app", false}, // not the same number of parts
		{"*.example.com", "a.b.example.com/app", false},
		{"reg.example.com", "reg.example.com:5000/app", false}, // ports must agree
		{"reg.example.com:5000", "reg.example.com:5000/app", true},
		{"reg.example.com/team", "reg.example.com/team/app", true},
		{"reg.example.com/team", "reg.example.com/other/app", false},
		{"docker.io", "docker.io/library/busybox", true},
	} {
		if got := imageMatches(tc.pattern, tc.repo); got != tc.want {
			t.Errorf("imageMatches(%s, %s) = %v, want %v", tc.pattern, tc.repo, got, tc.want)
		}
	}
}

func TestMatchAuthPrefersTheLongestKey(t *testing.T) {
	auth := map[string]providerAuth{
		"reg.example.com":      {Username: "registry"},
		"reg.example.com/team": {Username: "team"},
		"*.other.com":          {Username: "other"},
	}
	for repo, want := range map[string]string{
		"reg.example.com/team/app": "team",
		"reg.example.com/app":      "registry",
		"x.other.com/app":          "other",
		"unknown.com/app":          "",
	} {
		if got, _ := matchAuth(auth, repo); got.Username != want {
			t.Errorf("matchAuth(%s) = %q, want %q", repo, got.Username, want)
		}
	}
}

// TestCredentialProviderCache checks the kubelet's cache rules on answers stored directly:
// by image, registry or globally, for the answer's duration or the default, and not at
// all for a zero duration.
func TestCredentialProviderCache(t *testing.T) {
	now := time.Unix(1000, 0)
	p := &credentialProvider{defaultCacheDuration: time.Minute, now: func() time.Time { return now }, cache: map[string]providerCacheEntry{}}
	auth := map[string]providerAuth{"x": {Username: "u"}}
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

	p.store("a.io/app", &providerResponse{CacheKeyType: "Image", Auth: auth})
	p.store("b.io/app", &providerResponse{CacheKeyType: "Registry", CacheDuration: dur(time.Hour), Auth: auth})
	p.store("c.io/app", &providerResponse{CacheKeyType: "Global", CacheDuration: dur(0), Auth: auth})
	check := func(when string, want map[string]bool) {
		t.Helper()
		got := map[string]bool{}
		for repo := range want {
			_, got[repo] = p.cached(repo)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: cached (-want +got):\n%s", when, diff)
		}
	}
	check("at once", map[string]bool{"a.io/app": true, "a.io/other": false, "b.io/other": true, "c.io/app": false})
	now = now.Add(2 * time.Minute)
	check("after the default", map[string]bool{"a.io/app": false, "b.io/other": true})
	p.store("c.io/app", &providerResponse{CacheKeyType: "Global", Auth: auth})
	check("global", map[string]bool{"z.io/any": true})
}

// TestProviderCredentialsOnlyForTheImagesRegistry checks that a plugin's credentials
// go to the image's own registry and never to a mirror, and that a failing plugin is
// skipped.
func TestProviderCredentialsOnlyForTheImagesRegistry(t *testing.T) {
	p := &credentialProvider{name: "p", matchImages: []string{"reg.example.com"}, now: time.Now, cache: map[string]providerCacheEntry{
		"reg.example.com": {auth: map[string]providerAuth{"reg.example.com": {Username: "u", Password: "p"}}, expires: time.Now().Add(time.Hour)},
	}}
	broken := &credentialProvider{name: "broken", path: filepath.Join(t.TempDir(), "absent"), matchImages: []string{"reg.example.com"}, now: time.Now, cache: map[string]providerCacheEntry{}}
	imgs := &Store{log: pullLogger(t), providers: []*credentialProvider{broken, p}}
	ctx := context.Background()
	if user, pass, ok := imgs.providerCredentials(ctx, "reg.example.com/app:1", "reg.example.com"); !ok || user != "u" || pass != "p" {
		t.Errorf("providerCredentials(registry) = %q, %q, %v, want u, p", user, pass, ok)
	}
	if _, _, ok := imgs.providerCredentials(ctx, "reg.example.com/app:1", "mirror.example.com"); ok {
		t.Errorf("providerCredentials(mirror) gave credentials, want none")
	}
	if _, err := broken.provide(ctx, "reg.example.com/app"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("provide of a missing binary = %v, want not exist", err)
	}
}

// mustBuildTestProgram builds the command in testdata/<pkg> as out.
func mustBuildTestProgram(t *testing.T, pkg, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, "./testdata/"+pkg)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/%s: %v\n%s", pkg, err, msg)
	}
}
