package images

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// leakySecret is what the failing credential programs below print: a secret they were
// handed, as a helper that dumps its request or its store on failure does.
const leakySecret = "hunter2-s3cret"

// leakyProgram writes a shell script at path that prints leakySecret on stdout and
// stderr and exits with code.
func leakyProgram(t *testing.T, path string, code int) {
	t.Helper()
	script := fmt.Sprintf("#!/bin/sh\necho 'token=%s'\necho 'failed with password %s' >&2\nexit %d\n", leakySecret, leakySecret, code)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestFailingCredentialProgramsLeakNothing: a docker credential helper and a kubelet
// credential provider plugin that fail printing a secret are logged with their exit
// status and the size of their output, never the output itself.
func TestFailingCredentialProgramsLeakNothing(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	bin := t.TempDir()
	const host = "registry.example.com"
	var logged bytes.Buffer
	imgs := newStore(nil, Config{}, slog.New(slog.NewTextHandler(&logged, nil)))

	leakyProgram(t, filepath.Join(bin, "docker-credential-leaky"), 3)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	imgs.cfg.RegistryConfig = filepath.Join(t.TempDir(), "config.json")
	writeConfigFile(t, imgs.cfg.RegistryConfig, fmt.Sprintf(`{"credHelpers": {%q: "leaky"}}`, host))
	if _, _, ok := imgs.credentials(context.Background(), host); ok {
		t.Errorf("credentials from a failing helper, want none")
	}

	leakyProgram(t, filepath.Join(bin, "leaky-provider"), 4)
	config := filepath.Join(t.TempDir(), "credential-providers.yaml")
	writeConfigFile(t, config, `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: leaky-provider
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["`+host+`"]
  defaultCacheDuration: 10m
`)
	providers, err := loadCredentialProviders(config, bin)
	if err != nil {
		t.Fatalf("loadCredentialProviders = %v", err)
	}
	imgs.providers = providers
	if _, _, ok := imgs.providerCredentials(context.Background(), host+"/app:1", host); ok {
		t.Errorf("credentials from a failing provider, want none")
	}

	log := logged.String()
	if strings.Contains(log, leakySecret) {
		t.Errorf("the log holds the secret the programs printed:\n%s", log)
	}
	for _, want := range []string{"exit status 3", "exit status 4", "21 bytes on stdout, 36 on stderr"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
}
