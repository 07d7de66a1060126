package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/docker/docker-credential-helpers/client"
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
// refresh token.
func helperCredentials(ctx context.Context, helper, host string) (user, secret string, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, credentialExecTimeout)
	defer cancel()
	program := "docker-credential-" + helper
	creds, err := client.Get(func(args ...string) client.Program {
		return &helperProgram{cmd: exec.CommandContext(ctx, program, args...)}
	}, helperServerURL(host))
	switch {
	case credentials.IsErrCredentialsNotFound(err):
		return "", "", false, nil
	case err != nil:
		return "", "", false, fmt.Errorf("%s get %s: %w", program, helperServerURL(host), err)
	}
	if creds.Username == identityTokenUser {
		return "", creds.Secret, true, nil
	}
	return creds.Username, creds.Secret, true, nil
}

// helperServerURL is the server URL a helper is asked about for host: docker's spelling,
// the bare host, except for Docker Hub's registry.
func helperServerURL(host string) string {
	if canonicalHost(host) == "docker.io" {
		return dockerHubServerURL
	}
	return host
}

// helperProgram runs a credential helper for client.Get. Its stderr is kept and added to
// a failure's error, where the daemon's own log reports it.
type helperProgram struct {
	cmd    *exec.Cmd
	stderr strings.Builder
}

func (p *helperProgram) Input(in io.Reader) { p.cmd.Stdin = in }

func (p *helperProgram) Output() ([]byte, error) {
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.Output()
	if msg := strings.TrimSpace(p.stderr.String()); err != nil && msg != "" {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	if errors.Is(err, exec.ErrNotFound) {
		err = fmt.Errorf("%w (it must be in PATH)", err)
	}
	return out, err
}
