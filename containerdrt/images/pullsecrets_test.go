package images

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/runner"
)

// pullSecret returns a Secret of type typ that holds config under typ's key.
func pullSecret(name string, typ corev1.SecretType, config string) *corev1.Secret {
	key := corev1.DockerConfigJsonKey
	if typ == corev1.SecretTypeDockercfg {
		key = corev1.DockerConfigKey
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Type:       typ,
		Data:       map[string][]byte{key: []byte(config)},
	}
}

func basicAuth(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// TestPodKeyringReadsBothSecretTypes: a dockerconfigjson Secret's auths and a
// dockercfg Secret's bare map make one keyring, matched as the kubelet's: the most
// specific key first, the secrets' order within a key, Docker Hub's v1 entry for its
// images; a Secret of another type holds nothing.
func TestPodKeyringReadsBothSecretTypes(t *testing.T) {
	keyring, err := newPodKeyring([]*corev1.Secret{
		pullSecret("json", corev1.SecretTypeDockerConfigJson, fmt.Sprintf(`{"auths": {
			"https://reg.example.com/v1/": {"auth": %q},
			"reg.example.com/team": {"username": "b", "password": "2"}}}`, basicAuth("a", "1"))),
		pullSecret("cfg", corev1.SecretTypeDockercfg, fmt.Sprintf(`{
			"reg.example.com": {"auth": %q, "username": "ignored"},
			"*.example.com": {"username": "d", "password": "4"},
			"https://index.docker.io/v1/": {"auth": %q}}`, basicAuth("c", "3"), basicAuth("hub", "5"))),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "opaque"}, Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths": {"other.example.com": {"username": "x"}}}`)}},
	})
	if err != nil {
		t.Fatalf("newPodKeyring = %v", err)
	}
	for repo, want := range map[string][]string{
		"reg.example.com/team/app":  {"default/json b:2", "default/json a:1", "default/cfg c:3", "default/cfg d:4"},
		"reg.example.com/solo/app":  {"default/json a:1", "default/cfg c:3", "default/cfg d:4"},
		"cdn.example.com/app":       {"default/cfg d:4"},
		"docker.io/library/busybox": {"default/cfg hub:5"},
		"other.example.com/app":     {"default/cfg d:4"},
		"reg.example.com:5000/app":  nil, // another port is another registry
		"quay.io/app":               nil,
	} {
		var got []string
		for _, c := range keyring.lookup(repo) {
			got = append(got, fmt.Sprintf("%s %s:%s", c.secret, c.user, c.pass))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("lookup(%s) (-want +got):\n%s", repo, diff)
		}
	}
}

// TestPodKeyringRefusesWhatDoesNotDecode: a config or an auth that does not decode
// fails the keyring (and so the pull, as on the kubelet) with an error naming the
// Secret, never what it holds.
func TestPodKeyringRefusesWhatDoesNotDecode(t *testing.T) {
	for _, s := range []*corev1.Secret{
		pullSecret("bad-json", corev1.SecretTypeDockerConfigJson, `{"auths": "hunter2"}`),
		pullSecret("bad-cfg", corev1.SecretTypeDockercfg, `["hunter2"]`),
		pullSecret("bad-auth", corev1.SecretTypeDockerConfigJson, `{"auths": {"reg.example.com": {"auth": "hunter2!"}}}`),
	} {
		_, err := newPodKeyring([]*corev1.Secret{s})
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "default/"+s.Name) {
			t.Errorf("newPodKeyring(%s) = %v, want an error naming the Secret and quoting nothing", s.Name, err)
		}
	}
}

// TestPullAttemptsTryPodSecretsBeforeTheNode: each matching credential of the pod's
// secrets is an attempt of its own, in the keyring's order, and the node's credentials
// (--registry-config here) come last; a pod's credential goes to the image's registry
// only, a mirror getting the node's.
func TestPullAttemptsTryPodSecretsBeforeTheNode(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	config := filepath.Join(t.TempDir(), "config.json")
	writeConfigFile(t, config, fmt.Sprintf(`{"auths": {"reg.example.com": {"auth": %q}, "mirror.example.com": {"auth": %q}}}`,
		basicAuth("node", "n"), basicAuth("mirror", "m")))
	imgs := newStore(nil, Config{RegistryConfig: config}, pullLogger(t))
	keyring, err := newPodKeyring([]*corev1.Secret{
		pullSecret("first", corev1.SecretTypeDockercfg, `{"reg.example.com": {"username": "pod1", "password": "p1"}}`),
		pullSecret("second", corev1.SecretTypeDockerConfigJson, `{"auths": {"reg.example.com/team": {"username": "pod2", "password": "p2"}}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, creds := range imgs.pullAttempts(context.Background(), "reg.example.com/team/app:1", keyring) {
		user, pass, _ := creds("reg.example.com")
		muser, mpass, _ := creds("mirror.example.com")
		got = append(got, fmt.Sprintf("%s:%s %s:%s", user, pass, muser, mpass))
	}
	want := []string{"pod2:p2 mirror:m", "pod1:p1 mirror:m", "node:n mirror:m"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempts (registry, mirror) (-want +got):\n%s", diff)
	}
	if n := len(imgs.pullAttempts(context.Background(), "quay.io/app:1", keyring)); n != 1 {
		t.Errorf("%d attempts for an image no secret matches, want 1 (the node's)", n)
	}
}

// TestEnsureUsesPodPullSecrets pulls from a registry on 127.0.0.1 that wants basic auth:
// without credentials the pull fails; with a pod's pull secret of either type it works,
// before the node's credentials (wrong ones are never sent); a wrong pull secret falls
// back to the node's. No password reaches the errors or the log.
func TestEnsureUsesPodPullSecrets(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	t.Setenv("HOME", t.TempDir()) // no credentials of the host's
	reg := startTestRegistry(t, "puller", "s3cret-pw")
	ref := reg.push(t, "private/app:1", imageOptionsFor(t, ""))
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(io.MultiWriter(&logged, pullLogWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	nodeConfig := func(user, pass string) string {
		path := filepath.Join(t.TempDir(), "config.json")
		writeConfigFile(t, path, fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, reg.host, basicAuth(user, pass)))
		return path
	}
	jsonSecret := func(pass string) *corev1.Secret {
		return pullSecret("regcred", corev1.SecretTypeDockerConfigJson,
			fmt.Sprintf(`{"auths": {"http://%s/v2/": {"auth": %q}}}`, reg.host, basicAuth("puller", pass)))
	}
	cfgSecret := pullSecret("legacy", corev1.SecretTypeDockercfg,
		fmt.Sprintf(`{%q: {"username": "puller", "password": "s3cret-pw"}}`, reg.host))
	pull := func(cfg Config, secrets ...*corev1.Secret) error {
		_, err := newStore(d.Client, cfg, log).Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullAlways, Secrets: secrets})
		return err
	}

	if err := pull(Config{}); !errors.Is(err, runner.ErrImagePull) || !strings.Contains(err.Error(), "no basic auth credentials") {
		t.Errorf("ensure without credentials = %v, want ErrImagePull: ...no basic auth credentials", err)
	}
	for name, secret := range map[string]*corev1.Secret{"dockerconfigjson": jsonSecret("s3cret-pw"), "dockercfg": cfgSecret} {
		reg.takeWrong()
		if err := pull(Config{RegistryConfig: nodeConfig("puller", "wrong-node-pw")}, secret); err != nil {
			t.Errorf("ensure with a %s pull secret = %v", name, err)
		}
		if n := reg.takeWrong(); n != 0 {
			t.Errorf("ensure with a %s pull secret sent wrong credentials %d times, want the secret's first", name, n)
		}
	}
	if err := pull(Config{RegistryConfig: nodeConfig("puller", "s3cret-pw")}, jsonSecret("wrong-pod-pw")); err != nil {
		t.Errorf("ensure with a wrong pull secret and the node's credentials = %v, want the node's to pull", err)
	}
	err := pull(Config{}, jsonSecret("wrong-pod-pw"))
	if !errors.Is(err, runner.ErrImagePull) || !strings.Contains(err.Error(), "401 Unauthorized") || !strings.Contains(err.Error(), "no basic auth credentials") {
		t.Errorf("ensure with a wrong pull secret alone = %v, want ErrImagePull telling both attempts: the secret's 401 and the node's none", err)
	}
	for _, text := range []string{err.Error(), logged.String()} {
		if strings.Contains(text, "pw") || strings.Contains(text, basicAuth("puller", "s3cret-pw")) {
			t.Errorf("a password reached an error or the log:\n%s", text)
		}
	}
	if !strings.Contains(logged.String(), "secret=default/regcred") {
		t.Errorf("the log does not say which pull secret was used:\n%s", logged.String())
	}
}

// takeWrong returns how many requests were refused for their credentials since the
// last takeWrong.
func (r *testRegistry) takeWrong() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.wrong
	r.wrong = 0
	return n
}
