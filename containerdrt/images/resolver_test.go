package images

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestPlainHTTP(t *testing.T) {
	insecure := []string{"reg.lan", "other.lan:5000", "http://third.lan:80/", "10.1.0.0/16"}
	for host, want := range map[string]bool{
		"localhost":            true,
		"localhost:5000":       true,
		"127.0.0.1:36789":      true,
		"127.1.2.3":            true,
		"[::1]:5000":           true,
		"::1":                  true,
		"reg.lan":              true,
		"reg.lan:8080":         true, // an entry without a port matches every port
		"other.lan:5000":       true,
		"other.lan":            false,
		"other.lan:5001":       false,
		"third.lan:80":         true,
		"10.1.2.3:5000":        true,
		"10.2.0.1:5000":        false,
		"registry-1.docker.io": false,
		"reg.lan.example.com":  false,
	} {
		if got := plainHTTP(host, insecure); got != want {
			t.Errorf("plainHTTP(%s) = %v, want %v", host, got, want)
		}
	}
}

func TestRegistryCredentials(t *testing.T) {
	home, root, dir := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	basic := func(user, pass string) string {
		return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	}
	extra := filepath.Join(dir, "extra.json")
	writeConfigFile(t, extra, fmt.Sprintf(`{"auths": {
		"https://index.docker.io/v1/": {"auth": %q},
		"reg.example.com:5000/team": {"username": "team", "password": "p1"}}}`, basic("hub", "p0")))
	writeConfigFile(t, filepath.Join(root, "config.json"), fmt.Sprintf(`{"auths": {
		"reg.example.com:5000": {"auth": %q},
		"root.example.com": {"auth": %q}}}`, basic("ignored", "x"), basic("root", "p2")))
	os.Mkdir(filepath.Join(home, ".docker"), 0o700)
	writeConfigFile(t, filepath.Join(home, ".docker", "config.json"), `{"auths": {"bad.example.com": {"auth": "!!"}}}`)
	writeConfigFile(t, filepath.Join(home, ".dockercfg"), fmt.Sprintf(`{"legacy.example.com": {"auth": %q}}`, basic("old", "p3")))

	imgs := &Store{cfg: Config{RegistryConfig: extra, RootDir: root}, log: pullLogger(t)}
	for host, want := range map[string][2]string{
		"registry-1.docker.io": {"hub", "p0"},
		"reg.example.com:5000": {"team", "p1"}, // --registry-config is searched first
		"REG.example.com:5000": {"team", "p1"},
		"root.example.com":     {"root", "p2"},
		"legacy.example.com":   {"old", "p3"},
		"bad.example.com":      {"", ""},
		"reg.example.com":      {"", ""}, // another port is another registry
		"unknown.example.com":  {"", ""},
	} {
		user, pass, ok := imgs.credentials(context.Background(), host)
		if user != want[0] || pass != want[1] || ok != (want[0] != "") {
			t.Errorf("credentials(%s) = %q, %q, %v, want %q, %q", host, user, pass, ok, want[0], want[1])
		}
	}
}
