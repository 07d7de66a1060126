package cli

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/staticpod/staticpod/api/client"
	"github.com/staticpod/staticpod/api/wire"
)

// Exit codes shared by the commands of staticpod.
const (
	ExitInvalid = 1 // the input is wrong (an invalid manifest), or the work failed
	ExitUsage   = 2 // the command line is wrong, or the command cannot run here

	// Exit codes of exec when the command could not run, as shells and docker exec use
	// them.
	ExitCannotRun = wire.ExitCannotRun
	ExitNotFound  = wire.ExitNotFound
)

// UsageError makes a wrong command line exit 2, as scripts expect of a CLI. It is the
// OnUsageError of the app and of every command.
func UsageError(c *cli.Context, err error, _ bool) error {
	return cli.Exit(fmt.Sprintf("%v (see 'staticpod %s --help')", err, c.Command.Name), ExitUsage)
}

// exitError gives an error of a client command its exit code: 2 when no daemon could
// be reached (or the command line is wrong), 1 otherwise.
func exitError(cmd string, err error) error {
	var exit cli.ExitCoder
	var unreachable *client.UnreachableError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		return err
	case errors.As(err, &unreachable):
		return cli.Exit(explain(err).Error(), ExitUsage)
	}
	return cli.Exit(fmt.Sprintf("%s: %v", cmd, explain(err)), ExitInvalid)
}

// explain adds to an error of the API client the flag that may cure it.
func explain(err error) error {
	var unreachable *client.UnreachableError
	var apiErr *client.APIError
	var untrusted *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unreachable) && unreachable.Socket != "" && errors.Is(unreachable.Err, syscall.ENOENT):
		return &hinted{err, ", or give its socket with --api-socket (or STATICPOD_API_SOCKET)"}
	case errors.As(err, &untrusted):
		return &hinted{err, "; give the CA that signed it with --certificate-authority (or STATICPOD_CERTIFICATE_AUTHORITY)"}
	case errors.As(err, &apiErr) && apiErr.Code == http.StatusBadRequest && strings.Contains(apiErr.Message, "HTTPS server"):
		return &client.APIError{Code: apiErr.Code, Message: apiErr.Message + " (the daemon serves TLS: use https:// in --server)"}
	case errors.As(err, &apiErr) && (apiErr.Code == http.StatusUnauthorized || apiErr.Code == http.StatusForbidden):
		return &client.APIError{Code: apiErr.Code, Message: apiErr.Message + " (give the API token with --token-file)"}
	}
	return err
}

// hinted is an error with advice appended to its message.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() + h.hint }
func (h *hinted) Unwrap() error { return h.err }
