package images

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	"github.com/distribution/reference"
)

// Names of the docker credential files, as the kubelet searches them.
const (
	dockerConfigJSON = "config.json" // {"auths": {"host": {"auth": "base64(user:pass)"}}}
	dockerCfg        = ".dockercfg"  // the legacy format: {"host": {"auth": ...}}
)

// hostCredentials answers a registry's challenge with the username and password for host.
type hostCredentials func(host string) (user, pass string, err error)

// resolver returns a resolver for one pull, answering challenges with creds. Where to
// pull from comes from containerd's host configuration under the registry config dir
// (<dir>/<host>/hosts.toml: mirrors, CAs, client certificates, plain-HTTP hosts), read
// by containerd's own code at each pull, so an edit needs no restart. A registry whose
// hosts.toml names no server (or that has none) is reached over plain HTTP when it is on
// loopback or insecure; a mirror's scheme is the one hosts.toml spells.
func (s *Store) resolver(ctx context.Context, creds hostCredentials) remotes.Resolver {
	var hostDir func(string) (string, error)
	if s.cfg.RegistryConfigDir != "" {
		hostDir = config.HostDirFromRoot(s.cfg.RegistryConfigDir)
	}
	hosts := func(host string) ([]docker.RegistryHost, error) {
		opts := config.HostOptions{HostDir: hostDir, Credentials: creds}
		if plainHTTP(host, s.cfg.InsecureRegistries) {
			opts.DefaultScheme = "http" // only for the registry itself, not for its mirrors
		}
		return config.ConfigureHosts(ctx, opts)(host)
	}
	return docker.NewResolver(docker.ResolverOptions{Hosts: hosts})
}

// pullAttempts returns the credentials of each attempt to pull name, in order: one per
// credential of the pod's keyring that matches the image's repository, then the node's
// (nodeCredentials). A pod's credential goes only to the image's own registry, as a
// credential provider's does: the mirrors of an attempt get the node's credentials.
func (s *Store) pullAttempts(ctx context.Context, name string, keyring podKeyring) []hostCredentials {
	node := s.nodeCredentials(ctx, name)
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return []hostCredentials{node}
	}
	registry := canonicalHost(reference.Domain(named))
	var attempts []hostCredentials
	for _, c := range keyring.lookup(named.Name()) {
		attempts = append(attempts, func(host string) (string, string, error) {
			if canonicalHost(host) != registry {
				return node(host)
			}
			s.log.Debug("using registry credentials", "host", host, "secret", c.secret, "key", c.key)
			return c.user, c.pass, nil
		})
	}
	return append(attempts, node)
}

// nodeCredentials returns the node's credentials function of one pull of name: for the
// host a registry challenge comes from, the docker config files' credentials (their
// entries, credential helpers and stores) and then those of the credential provider
// plugins, which go only to the image's own registry, so that a mirror never sees a
// registry's password. None is not an error: the registry then answers 401.
func (s *Store) nodeCredentials(ctx context.Context, name string) hostCredentials {
	return func(host string) (string, string, error) {
		if user, pass, ok := s.credentials(ctx, host); ok {
			return user, pass, nil
		}
		if user, pass, ok := s.providerCredentials(ctx, name, host); ok {
			return user, pass, nil
		}
		return "", "", nil
	}
}

// plainHTTP reports whether the registry at host (host or host:port) is talked to over
// plain HTTP: any loopback registry (localhost, 127.0.0.0/8, ::1), on any port, and those
// insecure names. An insecure entry without a port matches every port of its host; a CIDR
// entry matches registries addressed by an IP inside it; a scheme or trailing slash in an
// entry is ignored.
func plainHTTP(host string, insecure []string) bool {
	if docker.IsLocalhost(host) {
		return true
	}
	hostname := splitHostname(host)
	for _, entry := range insecure {
		entry = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(entry, "http://"), "https://"), "/")
		if strings.EqualFold(entry, host) || strings.EqualFold(entry, hostname) {
			return true
		}
		if _, cidr, err := net.ParseCIDR(entry); err == nil {
			if ip := net.ParseIP(hostname); ip != nil && cidr.Contains(ip) {
				return true
			}
		}
	}
	return false
}

// splitHostname returns host without its port or IPv6 brackets.
func splitHostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// credentials returns the username and password for the registry at host from the first
// docker config file, in credentialPaths order, that has them: from its credential helper
// for host (credHelpers) or its credential store (credsStore), through the
// docker-credential-* protocol, and else from its auths entry. Files are read at each
// challenge, so an edited config.json needs no restart. Unreadable or malformed files are
// skipped, as the kubelet does; a helper that fails is logged and skipped.
func (s *Store) credentials(ctx context.Context, host string) (user, pass string, ok bool) {
	for _, path := range s.credentialPaths() {
		conf, err := readDockerConfig(path)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				s.log.Debug("skipped registry credentials file", "path", path, "err", err)
			}
			continue
		}
		if helper := conf.helper(host); helper != "" {
			user, pass, found, err := helperCredentials(ctx, helper, host)
			switch {
			case err != nil:
				s.log.Warn("registry credential helper failed", "host", host, "path", path, "err", err)
			case found:
				s.log.Debug("using registry credentials", "host", host, "path", path, "helper", helper)
				return user, pass, true
			}
		}
		if user, pass, ok := conf.Auths.lookup(host); ok {
			s.log.Debug("using registry credentials", "host", host, "path", path)
			return user, pass, true
		}
	}
	return "", "", false
}

// credentialPaths lists the files credentials searches, in order: --registry-config, then
// the kubelet's search path with staticpod's root dir in the place of the kubelet's:
// config.json in the root dir, the working directory, $HOME/.docker and /.docker, then
// .dockercfg in the root dir, the working directory, $HOME and /.
func (s *Store) credentialPaths() []string {
	var paths []string
	if s.cfg.RegistryConfig != "" {
		paths = append(paths, s.cfg.RegistryConfig)
	}
	cwd, _ := os.Getwd()
	home := os.Getenv("HOME")
	add := func(name string, dirs ...string) {
		for _, dir := range dirs {
			if dir != "" {
				paths = append(paths, filepath.Join(dir, name))
			}
		}
	}
	add(dockerConfigJSON, s.cfg.RootDir, cwd, homeSubdir(home, ".docker"), "/.docker")
	add(dockerCfg, s.cfg.RootDir, cwd, home, "/")
	return slices.Compact(paths)
}

// homeSubdir returns dir under home, or "" when home is unset.
func homeSubdir(home, dir string) string {
	if home == "" {
		return ""
	}
	return filepath.Join(home, dir)
}

// authEntry is one registry's entry in a docker config file. auth, when set, overrides
// username and password.
type authEntry struct {
	Auth     string `json:"auth"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// auths maps a docker config file's keys (hosts or URLs) to their entries.
type auths map[string]authEntry

// dockerConfig is what credentials reads of a docker config file.
type dockerConfig struct {
	Auths       auths             `json:"auths"`
	CredsStore  string            `json:"credsStore"`  // helper for every registry: docker-credential-<credsStore>
	CredHelpers map[string]string `json:"credHelpers"` // helper per registry key (host or URL)
}

// readDockerConfig reads a docker config file in either format: config.json's
// {"auths": {...}, "credsStore": ..., "credHelpers": {...}} or .dockercfg's bare map of
// auths.
func readDockerConfig(path string) (dockerConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return dockerConfig{}, err
	}
	var file dockerConfig
	if err := json.Unmarshal(data, &file); err == nil && (file.Auths != nil || file.CredsStore != "" || file.CredHelpers != nil) {
		return file, nil
	}
	var legacy auths
	if err := json.Unmarshal(data, &legacy); err != nil {
		return dockerConfig{}, fmt.Errorf("decode %s: %w", path, err)
	}
	return dockerConfig{Auths: legacy}, nil
}

// helper returns the name of the credential helper for host: the credHelpers entry whose
// key names host (matched as auths keys are), else credsStore, else "".
func (c dockerConfig) helper(host string) string {
	want := canonicalHost(host)
	for _, key := range slices.Sorted(maps.Keys(c.CredHelpers)) {
		if canonicalHost(keyHost(key)) == want && c.CredHelpers[key] != "" {
			return c.CredHelpers[key]
		}
	}
	return c.CredsStore
}

// lookup returns the credentials whose key names host. Keys match by host (and port)
// alone, whatever their scheme or path; Docker Hub's keys (https://index.docker.io/v1/,
// docker.io, ...) match its registry host. When several keys match, the first in sorted
// order wins, so the answer does not depend on map order.
func (a auths) lookup(host string) (user, pass string, ok bool) {
	want := canonicalHost(host)
	for _, key := range slices.Sorted(maps.Keys(a)) {
		if canonicalHost(keyHost(key)) != want {
			continue
		}
		e := a[key]
		if e.Auth == "" {
			return e.Username, e.Password, e.Username != "" || e.Password != ""
		}
		if user, pass, err := decodeAuth(e.Auth); err == nil {
			return user, pass, true
		}
	}
	return "", "", false
}

// keyHost returns the host of a docker config key: "https://r.example.com:5000/v1/" and
// "r.example.com:5000/team" both give "r.example.com:5000".
func keyHost(key string) string {
	if strings.Contains(key, "://") {
		if u, err := url.Parse(key); err == nil {
			return u.Host
		}
	}
	host, _, _ := strings.Cut(key, "/")
	return host
}

// canonicalHost lowercases host and gives Docker Hub's names one spelling.
func canonicalHost(host string) string {
	host = strings.ToLower(host)
	switch host {
	case "docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		return "docker.io"
	}
	return host
}

// decodeAuth splits a config file's auth field, base64("user:password").
func decodeAuth(field string) (string, string, error) {
	raw, err := base64.StdEncoding.DecodeString(field)
	if err != nil {
		return "", "", fmt.Errorf("decode auth: %w", err)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", errors.New("decode auth: no colon")
	}
	return user, pass, nil
}
