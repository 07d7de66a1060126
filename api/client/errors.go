package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UnreachableError is a request that reached no daemon: the socket is missing, nobody
// listens on it or at the server, or the caller may not open the socket. Its message
// says which, and what to do; errors.Is sees the dial error (syscall.ENOENT, ...).
type UnreachableError struct {
	Socket string // the unix socket; "" over TCP
	Server string // the server's URL over TCP; "" over the socket
	Err    error  // what dialing returned
}

func (e *UnreachableError) Error() string {
	const start = "start it with `staticpod run` (or `systemctl start staticpod`)"
	where := e.Server
	if e.Socket != "" {
		where = "unix socket " + e.Socket
	}
	var untrusted *tls.CertificateVerificationError
	switch {
	case errors.Is(e.Err, syscall.EACCES) || errors.Is(e.Err, syscall.EPERM):
		return fmt.Sprintf("permission denied on the %s: the API socket is open to its owner only (mode 0600); run this command as root, e.g. with sudo", where)
	case e.Socket != "" && errors.Is(e.Err, syscall.ENOENT):
		return fmt.Sprintf("the staticpod daemon is not running: no API socket at %s; %s", e.Socket, start)
	case e.Socket != "" && errors.Is(e.Err, syscall.ECONNREFUSED):
		return fmt.Sprintf("the staticpod daemon is not running: nothing listens on the %s (left behind by a daemon that exited?); %s", where, start)
	case errors.As(e.Err, &untrusted):
		return fmt.Sprintf("the staticpod daemon at %s has a certificate this client does not trust: %v", e.Server, untrusted.Err)
	case errors.Is(e.Err, syscall.ECONNREFUSED):
		return fmt.Sprintf("the staticpod daemon does not answer at %s: connection refused; is `staticpod run --listen` running there?", e.Server)
	}
	return fmt.Sprintf("cannot reach the staticpod daemon at the %s: %v", where, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// APIError is an answer of the daemon other than 2xx.
type APIError struct {
	Code    int    // the HTTP status code
	Message string // the message of the daemon's metav1.Status, or the body's text
}

func (e *APIError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Code) }

// NotFoundError is a pod the daemon does not run.
type NotFoundError struct{ Namespace, Name string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("pod %q not found", e.Namespace+"/"+e.Name)
}

// dialError turns the error of a request that got no answer into an *UnreachableError;
// a cancelled or expired context is returned as it is.
func (c *Client) dialError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if c.socket != "" {
		return &UnreachableError{Socket: c.socket, Err: err}
	}
	return &UnreachableError{Server: c.base, Err: err}
}

// readAPIError turns a non-2xx answer into an *APIError, with the message of the
// metav1.Status the daemon sends, or the text of the body.
func readAPIError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &APIError{Code: resp.StatusCode, Message: strings.TrimSpace(string(body))}
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		e.Message = st.Message
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}
