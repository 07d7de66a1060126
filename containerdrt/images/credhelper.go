package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/docker/docker-credential-helpers/credentials"
)

// credentialExecTimeout bounds one run of a credential helper or provider plugin: the
// kubelet's catch-all for its plugins, long enough for one that retries a cloud API, short
// enough that a hung one does not hold a pull forever.
const credentialExecTimeout = time.Minute

// dockerHubServerURL is the server URL docker's tools store Docker Hub's credentials under.
const dockerHubServerURL = "https://index.docker.io/v1/"

// identityTokenUser is the username a helper answers with when its secret is an identity
// (OAuth refresh) token rather than a password.
const identityTokenUser = "<token>"

// helperCredentials asks the credential helper docker-credential-<helper>, found in PATH,
// for the credentials of the registry at host, as docker does (`get`, the server URL on
// stdin, JSON on stdout). found is false when the helper has none for host. An identity
// token comes back with an empty user, which containerd's authorizer takes as an OAuth
// refresh token. A helper that fails is described by its exit status and the size of
// what it printed, never by its output: that may hold the very secret it guards.
func helperCredentials(ctx context.Context, helper, host string) (user, secret string, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, credentialExecTimeout)
	defer cancel()
	program := "docker-credential-" + helper
	server := helperServerURL(host)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, program, credentials.ActionGet)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(server), &stdout, &stderr
	err = cmd.Run()
	switch {
	case err != nil && credentials.IsErrCredentialsNotFoundMessage(stdout.String()):
		return "", "", false, nil
	case errors.Is(err, exec.ErrNotFound):
		return "", "", false, fmt.Errorf("%s get %s: %w (it must be in PATH)", program, server, err)
	case err != nil:
		return "", "", false, fmt.Errorf("%s get %s: %w (%s)", program, server, err, withheld(stdout.Len(), stderr.Len()))
	}
	var creds credentials.Credentials
	if err := json.Unmarshal(stdout.Bytes(), &creds); err != nil {
		// Not wrapped: the message could quote the credentials.
		return "", "", false, fmt.Errorf("%s get %s: its answer does not decode (%s)", program, server, withheld(stdout.Len(), stderr.Len()))
	}
	if creds.Username == identityTokenUser {
		return "", creds.Secret, true, nil
	}
	return creds.Username, creds.Secret, true, nil
}

// withheld describes what a credential helper or provider plugin printed without
// showing it: it may hold a secret.
func withheld(stdout, stderr int) string {
	return fmt.Sprintf("output withheld, it may hold a secret: %d bytes on stdout, %d on stderr", stdout, stderr)
}

// helperServerURL is the server URL a helper is asked about for host: docker's spelling,
// the bare host, except for Docker Hub's registry.
func helperServerURL(host string) string {
	if canonicalHost(host) == "docker.io" {
		return dockerHubServerURL
	}
	return host
}
