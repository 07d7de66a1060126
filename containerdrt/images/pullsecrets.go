package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// A pod's image pull secrets (Secrets of type kubernetes.io/dockerconfigjson or
// kubernetes.io/dockercfg) make a keyring as the kubelet's credentialprovider makes one
// of them: each entry's key loses its scheme and a leading /v1/ or /v2/ of its path
// (https://index.docker.io/v1/ is index.docker.io), and an image's repository is
// matched against the keys in reverse sorted order, so that the most specific path
// comes first; entries of one key keep the order of the secrets. Docker Hub's images
// fall back to the index.docker.io entry when no key matches them. Only the auths of a
// config are read: a credsStore or credHelpers in a Secret names a program of the
// node, which a pod's manifest does not choose.

// defaultRegistryKey is the key Docker Hub's credentials go under (its v1 server URL,
// https://index.docker.io/v1/, without scheme and path).
const defaultRegistryKey = "index.docker.io"

// secretCredential is one registry's credentials in a pod's image pull secret.
type secretCredential struct {
	secret     string // the Secret's namespace/name, to name it in the log
	key        string // what it matches: host[:port][/path]
	user, pass string
}

// podKeyring is the credentials of a pod's image pull secrets, by key.
type podKeyring struct {
	index []string // the keys, reverse sorted: the order they are matched in
	creds map[string][]secretCredential
}

// newPodKeyring reads the credentials of secrets, in their order. A Secret of another
// type, or without its key, holds none. A config that does not decode fails the whole
// keyring, as the kubelet's fails the pull: the error names the Secret and never quotes
// what it holds.
func newPodKeyring(secrets []*corev1.Secret) (podKeyring, error) {
	k := podKeyring{creds: map[string][]secretCredential{}}
	for _, s := range secrets {
		name := s.Namespace + "/" + s.Name
		entries, err := pullSecretAuths(s)
		if err != nil {
			return podKeyring{}, fmt.Errorf("image pull secret %s: %w", name, err)
		}
		for _, loc := range slices.Sorted(maps.Keys(entries)) {
			key, ok := keyringKey(loc)
			if !ok {
				continue // the kubelet ignores an entry whose key is no URL
			}
			user, pass, err := entries[loc].credentials()
			if err != nil {
				return podKeyring{}, fmt.Errorf("image pull secret %s: entry %s: %w", name, key, err)
			}
			if _, seen := k.creds[key]; !seen {
				k.index = append(k.index, key)
			}
			k.creds[key] = append(k.creds[key], secretCredential{secret: name, key: key, user: user, pass: pass})
		}
	}
	slices.Sort(k.index)
	slices.Reverse(k.index)
	return k, nil
}

// pullSecretAuths returns the auths of a pull secret's config, by key; none for a
// Secret of another type or one whose config is empty.
func pullSecretAuths(s *corev1.Secret) (auths, error) {
	key := manifests.PullSecretTypes[s.Type]
	data := s.Data[key]
	if key == "" || len(data) == 0 {
		return nil, nil
	}
	// Not the decoder's own message: it may quote part of the value.
	undecodable := fmt.Errorf("its %s does not decode as a docker config", key)
	if s.Type == corev1.SecretTypeDockercfg {
		var a auths
		if err := json.Unmarshal(data, &a); err != nil {
			return nil, undecodable
		}
		return a, nil
	}
	var conf struct {
		Auths auths `json:"auths"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		return nil, undecodable
	}
	return conf.Auths, nil
}

// credentials returns the entry's username and password: its auth field's when it has
// one, as the kubelet reads it, else its username and password fields.
func (e authEntry) credentials() (user, pass string, err error) {
	if e.Auth == "" {
		return e.Username, e.Password, nil
	}
	user, pass, err = decodeAuth(e.Auth)
	if err != nil {
		return "", "", errors.New("its auth does not decode as base64(user:password)")
	}
	return user, pass, nil
}

// keyringKey returns the key a config entry's location goes under: without its scheme,
// and without a leading /v1/ or /v2/ of its path or a path of just "/". ok is false when
// loc does not parse as a URL.
func keyringKey(loc string) (key string, ok bool) {
	value := loc
	if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
		value = "https://" + value
	}
	u, err := url.Parse(value)
	if err != nil {
		return "", false
	}
	path := u.Path
	if strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v2/") {
		path = path[3:]
	}
	if path == "" || path == "/" {
		return u.Host, true
	}
	return u.Host + path, true
}

// lookup returns the credentials whose keys match repo (a repository without tag or
// digest: docker.io/library/busybox), most specific key first.
func (k podKeyring) lookup(repo string) []secretCredential {
	var out []secretCredential
	for _, key := range k.index {
		if imageMatches(key, repo) {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) == 0 && isDockerHub(repo) {
		out = k.creds[defaultRegistryKey]
	}
	return out
}

// isDockerHub reports whether repo is on Docker Hub: its first element names no other
// registry (has no dot or colon), or is docker.io or index.docker.io.
func isDockerHub(repo string) bool {
	first, _, found := strings.Cut(repo, "/")
	switch {
	case first == "":
		return false
	case !found, first == "docker.io", first == defaultRegistryKey:
		return true
	}
	return !strings.ContainsAny(first, ".:")
}
