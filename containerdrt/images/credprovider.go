package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	"golang.org/x/sync/singleflight"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The kubelet's credential provider plugins (--image-credential-provider-config and
// --image-credential-provider-bin-dir), as pkg/credentialprovider/plugin runs them: a
// plugin whose matchImages match the image's repository is run with a
// CredentialProviderRequest on stdin and answers a CredentialProviderResponse on stdout,
// whose auth keys are matched against the repository like the kubelet's keyring does; its
// answer is cached per image, registry or globally, as it says, for its cacheDuration (or
// the config's defaultCacheDuration).

// The API versions the kubelet accepts, newest first.
var (
	providerConfigVersions = []string{"kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1beta1", "kubelet.config.k8s.io/v1alpha1"}
	providerAPIVersions    = []string{"credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1beta1", "credentialprovider.kubelet.k8s.io/v1alpha1"}
)

// providerCacheGlobal is the cache key of an answer whose cacheKeyType is Global.
const providerCacheGlobal = "global"

// providerConfigFile is a CredentialProviderConfig document.
type providerConfigFile struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Providers  []providerConfig `json:"providers"`
}

// providerConfig is one provider of a CredentialProviderConfig.
type providerConfig struct {
	Name                 string           `json:"name"`
	MatchImages          []string         `json:"matchImages"`
	DefaultCacheDuration *metav1.Duration `json:"defaultCacheDuration"`
	APIVersion           string           `json:"apiVersion"`
	Args                 []string         `json:"args,omitempty"`
	Env                  []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env,omitempty"`
	TokenAttributes json.RawMessage `json:"tokenAttributes,omitempty"`
}

// providerRequest is a CredentialProviderRequest. Image is the repository, without tag
// or digest, as the kubelet sends it (docker.io/library/busybox).
type providerRequest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Image      string `json:"image"`
}

// providerResponse is a CredentialProviderResponse.
type providerResponse struct {
	APIVersion    string                  `json:"apiVersion"`
	Kind          string                  `json:"kind"`
	CacheKeyType  string                  `json:"cacheKeyType"` // Image, Registry or Global
	CacheDuration *metav1.Duration        `json:"cacheDuration,omitempty"`
	Auth          map[string]providerAuth `json:"auth"` // by image pattern: host globs, optional port and path prefix
}

type providerAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// credentialProvider is one configured plugin with the cache of its answers.
type credentialProvider struct {
	name                 string
	path                 string // the plugin's binary: bin dir + name
	apiVersion           string
	args                 []string
	env                  []string // NAME=value, appended to the daemon's environment
	matchImages          []string
	defaultCacheDuration time.Duration
	now                  func() time.Time

	flight singleflight.Group // one run at a time per image

	mu    sync.Mutex                    // guards cache
	cache map[string]providerCacheEntry // by image, registry or providerCacheGlobal
}

type providerCacheEntry struct {
	auth    map[string]providerAuth
	expires time.Time
}

// loadCredentialProviders reads and checks the CredentialProviderConfig at path (a file,
// or a directory whose *.json, *.yaml and *.yml files are read in sorted order) and finds
// each provider's binary in binDir. It fails as the kubelet does at start: on a bad
// config, a missing bin dir or a missing binary. No path means no providers.
func loadCredentialProviders(path, binDir string) ([]*credentialProvider, error) {
	if path == "" {
		return nil, nil
	}
	if binDir == "" {
		return nil, errors.New("--image-credential-provider-config needs --image-credential-provider-bin-dir")
	}
	if _, err := os.Stat(binDir); err != nil {
		return nil, fmt.Errorf("credential provider bin dir: %w", err)
	}
	configs, err := readProviderConfigs(path)
	if err != nil {
		return nil, err
	}
	var providers []*credentialProvider
	for _, c := range configs {
		bin, err := exec.LookPath(filepath.Join(binDir, c.Name))
		if err != nil {
			return nil, fmt.Errorf("credential provider %s: %w", c.Name, err)
		}
		p := &credentialProvider{
			name: c.Name, path: bin, apiVersion: c.APIVersion, args: c.Args,
			matchImages: c.MatchImages, defaultCacheDuration: c.DefaultCacheDuration.Duration,
			now: time.Now, cache: map[string]providerCacheEntry{},
		}
		for _, e := range c.Env {
			p.env = append(p.env, e.Name+"="+e.Value)
		}
		providers = append(providers, p)
	}
	return providers, nil
}

// readProviderConfigs decodes the config file or directory at path, strictly (an unknown
// field is an error, as on the kubelet), and checks its providers.
func readProviderConfigs(path string) ([]providerConfig, error) {
	files := []string{path}
	if info, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("credential provider config: %w", err)
	} else if info.IsDir() {
		files = nil
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("credential provider config: %w", err)
		}
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".json" || ext == ".yaml" || ext == ".yml") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("credential provider config: no *.json, *.yaml or *.yml file in %s", path)
		}
	}
	var all []providerConfig
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("credential provider config: %w", err)
		}
		var doc providerConfigFile
		if err := yaml.UnmarshalStrict(data, &doc); err != nil {
			return nil, fmt.Errorf("credential provider config %s: %w", file, err)
		}
		if doc.Kind != "CredentialProviderConfig" || !slices.Contains(providerConfigVersions, doc.APIVersion) {
			return nil, fmt.Errorf("credential provider config %s: want kind CredentialProviderConfig of apiVersion %s, have %s %s",
				file, strings.Join(providerConfigVersions, ", "), doc.Kind, doc.APIVersion)
		}
		all = append(all, doc.Providers...)
	}
	if err := validateProviders(all); err != nil {
		return nil, fmt.Errorf("credential provider config %s: %w", path, err)
	}
	return all, nil
}

// validateProviders returns every problem of the providers, with its field path.
func validateProviders(providers []providerConfig) error {
	var errs []error
	bad := func(i int, field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("providers[%d].%s: %s", i, field, fmt.Sprintf(format, args...)))
	}
	if len(providers) == 0 {
		errs = append(errs, errors.New("providers: at least one provider is required"))
	}
	seen := map[string]bool{}
	for i, p := range providers {
		switch {
		case p.Name == "" || p.Name == "." || p.Name == ".." || strings.ContainsAny(p.Name, "/ "):
			bad(i, "name", "%q is not a file name", p.Name)
		case seen[p.Name]:
			bad(i, "name", "duplicate provider %q", p.Name)
		}
		seen[p.Name] = true
		if !slices.Contains(providerAPIVersions, p.APIVersion) {
			bad(i, "apiVersion", "%q is not one of %s", p.APIVersion, strings.Join(providerAPIVersions, ", "))
		}
		if len(p.MatchImages) == 0 {
			bad(i, "matchImages", "at least one image pattern is required")
		}
		for j, m := range p.MatchImages {
			if _, err := parseSchemeless(m); err != nil {
				bad(i, fmt.Sprintf("matchImages[%d]", j), "%v", err)
			}
		}
		switch {
		case p.DefaultCacheDuration == nil:
			bad(i, "defaultCacheDuration", "required")
		case p.DefaultCacheDuration.Duration < 0:
			bad(i, "defaultCacheDuration", "must not be negative")
		}
		if len(p.TokenAttributes) > 0 {
			bad(i, "tokenAttributes", "service account tokens need an apiserver; static pods have none")
		}
	}
	return errors.Join(errs...)
}

// providerCredentials returns the credentials the first plugin that has some gives for
// the repository of name, when host is the image's own registry: a mirror gets none of
// them. The plugins are run only here, when a registry challenges a pull, and a plugin
// that fails is logged and skipped, as on the kubelet.
func (s *Store) providerCredentials(ctx context.Context, name, host string) (user, pass string, ok bool) {
	if len(s.providers) == 0 {
		return "", "", false
	}
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil || canonicalHost(reference.Domain(named)) != canonicalHost(host) {
		return "", "", false
	}
	repo := named.Name()
	for _, p := range s.providers {
		if !p.matches(repo) {
			continue
		}
		auth, err := p.provide(ctx, repo)
		if err != nil {
			s.log.Warn("credential provider failed", "provider", p.name, "image", repo, "err", err)
			continue
		}
		if a, ok := matchAuth(auth, repo); ok {
			s.log.Debug("using registry credentials", "host", host, "provider", p.name)
			return a.Username, a.Password, true
		}
	}
	return "", "", false
}

// matches reports whether repo matches one of the plugin's matchImages.
func (p *credentialProvider) matches(repo string) bool {
	return slices.ContainsFunc(p.matchImages, func(m string) bool { return imageMatches(m, repo) })
}

// provide returns the plugin's answer for repo, from the cache while it holds, else by
// running the plugin (once for concurrent pulls of one image).
func (p *credentialProvider) provide(ctx context.Context, repo string) (map[string]providerAuth, error) {
	if auth, ok := p.cached(repo); ok {
		return auth, nil
	}
	v, err, _ := p.flight.Do(repo, func() (any, error) {
		resp, err := p.run(ctx, repo)
		if err != nil {
			return nil, err
		}
		p.store(repo, resp)
		return resp.Auth, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(map[string]providerAuth), nil
}

// cached returns the answer cached for repo itself, its registry or globally, in that
// order, dropping expired ones.
func (p *credentialProvider) cached(repo string) (map[string]providerAuth, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for key, e := range p.cache {
		if now.After(e.expires) {
			delete(p.cache, key)
		}
	}
	for _, key := range []string{repo, registryOf(repo), providerCacheGlobal} {
		if e, ok := p.cache[key]; ok {
			return e.auth, true
		}
	}
	return nil, false
}

// store caches resp for as long as it says (a zero cacheDuration: not at all; none: the
// config's defaultCacheDuration) under the key its cacheKeyType names.
func (p *credentialProvider) store(repo string, resp *providerResponse) {
	ttl := p.defaultCacheDuration
	if resp.CacheDuration != nil {
		ttl = resp.CacheDuration.Duration
	}
	if ttl <= 0 {
		return
	}
	key := repo
	switch resp.CacheKeyType {
	case "Registry":
		key = registryOf(repo)
	case "Global":
		key = providerCacheGlobal
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cache[key] = providerCacheEntry{auth: resp.Auth, expires: p.now().Add(ttl)}
}

// run executes the plugin for repo: `NAME=value... <bin-dir>/<name> args... <request`.
func (p *credentialProvider) run(ctx context.Context, repo string) (*providerResponse, error) {
	req, err := json.Marshal(providerRequest{APIVersion: p.apiVersion, Kind: "CredentialProviderRequest", Image: repo})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, credentialExecTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, p.path, p.args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(req), &stdout, &stderr
	cmd.Env = append(os.Environ(), p.env...)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("run %s for %s: %w (%s)", p.path, repo, err, withheld(stdout.Len(), stderr.Len()))
	}
	var resp providerResponse
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		// Not wrapped: the message could quote the credentials.
		return nil, fmt.Errorf("%s for %s: response does not decode", p.name, repo)
	}
	switch {
	case resp.Kind != "CredentialProviderResponse" || resp.APIVersion != p.apiVersion:
		return nil, fmt.Errorf("%s for %s: response is %s %s, want CredentialProviderResponse %s",
			p.name, repo, resp.Kind, resp.APIVersion, p.apiVersion)
	case resp.CacheKeyType != "Image" && resp.CacheKeyType != "Registry" && resp.CacheKeyType != "Global":
		return nil, fmt.Errorf("%s for %s: cacheKeyType %q is not Image, Registry or Global", p.name, repo, resp.CacheKeyType)
	}
	return &resp, nil
}

// matchAuth returns the entry of auth whose key matches repo; when several do, the
// greatest key in sorted order (the most specific path) wins, as in the kubelet's keyring.
func matchAuth(auth map[string]providerAuth, repo string) (providerAuth, bool) {
	keys := make([]string, 0, len(auth))
	for k := range auth {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Reverse(keys)
	for _, k := range keys {
		if imageMatches(k, repo) {
			return auth[k], true
		}
	}
	return providerAuth{}, false
}

// imageMatches reports whether repo matches pattern as the kubelet matches matchImages
// and auth keys: the same port, the same number of host name parts each matching as a
// glob (*.example.com), and pattern's path a prefix of repo's. Neither carries a scheme.
func imageMatches(pattern, repo string) bool {
	p, err := parseSchemeless(pattern)
	if err != nil {
		return false
	}
	r, err := parseSchemeless(repo)
	if err != nil {
		return false
	}
	pParts, pPort := splitHostParts(p.Host)
	rParts, rPort := splitHostParts(r.Host)
	if pPort != rPort || len(pParts) != len(rParts) || !strings.HasPrefix(r.Path, p.Path) {
		return false
	}
	for k := range pParts {
		if ok, err := filepath.Match(pParts[k], rParts[k]); err != nil || !ok {
			return false
		}
	}
	return true
}

// parseSchemeless parses an image pattern or repository, which has no scheme.
func parseSchemeless(s string) (*url.URL, error) {
	return url.Parse("https://" + s)
}

// splitHostParts splits host into its dot-separated parts and its port.
func splitHostParts(host string) ([]string, string) {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = host, ""
	}
	return strings.Split(h, "."), port
}

// registryOf returns the registry host of repo, its first path element, as the kubelet's
// cache keys it.
func registryOf(repo string) string {
	host, _, _ := strings.Cut(repo, "/")
	return host
}
