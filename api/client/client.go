// Package client is a Go client of staticpod's local HTTP API (the daemon's package api),
// over the daemon's unix socket or over its TCP listener (http, or https trusting a CA of
// the caller's choice) with a bearer token. It lists pods, asks whether it lists every
// pod its sources want, reads one pod, its events and its containers' logs, lists the
// images and the ConfigMaps and Secrets (names and keys), and reports what went wrong as
// typed errors for errors.As: *UnreachableError when no daemon answered, *NotFoundError
// for a pod the daemon does not run, *APIError for any other answer but 2xx.
//
// Exec runs a command in a container over an upgraded connection (see package wire for
// its frames), with its input, output, terminal and exit code; *ExecError is a command
// that did not run to its end.
//
// It owns no command line and talks to no runtime: it must not import urfave/cli,
// containerd, the runner or Prometheus. The types of the API's answers are package
// wire's.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/wire"
)

// DefaultSocket is where the daemon serves its API unless told otherwise.
const DefaultSocket = "/run/staticpod/staticpod.sock"

// Client reads the daemon's API. It is safe for concurrent use.
type Client struct {
	http   *http.Client
	base   string // URL the paths are appended to
	socket string // the unix socket; "" over TCP
	token  string // bearer token; "" for none
}

// New returns a client of the API on the unix socket at path.
func New(socket string) *Client {
	dialer := &net.Dialer{}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
	}
	return &Client{http: &http.Client{Transport: transport}, base: "http://staticpod", socket: socket}
}

// NewURL returns a client of the API at server (http://host:port or https://host:port,
// as `staticpod run --listen` serves it) that sends token, if any, as its bearer token,
// and trusts the system's CAs over https.
func NewURL(server, token string) (*Client, error) {
	return NewTLS(server, token, TLSOptions{})
}

// TLSOptions say which certificates a client over https:// trusts, as kubectl's
// --certificate-authority and --insecure-skip-tls-verify do. The zero value trusts the
// system's CAs.
type TLSOptions struct {
	CA                 []byte // PEM of the CAs to trust instead of the system's
	InsecureSkipVerify bool   // trust any certificate: the connection is encrypted, but to anyone
}

// NewTLS is NewURL with the certificates opts trust. A CA with InsecureSkipVerify is an
// error, as it is to kubectl, and so is either with an http:// server, where they would
// mean nothing.
func NewTLS(server, token string, opts TLSOptions) (*Client, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("use http://host:port or https://host:port")
	}
	tlsOpts := opts.CA != nil || opts.InsecureSkipVerify
	switch {
	case opts.CA != nil && opts.InsecureSkipVerify:
		return nil, errors.New("specifying a root certificates file with the insecure flag is not allowed")
	case tlsOpts && u.Scheme != "https":
		return nil, errors.New("a CA and skipping verification are for https:// servers")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ForceAttemptHTTP2 = false // exec upgrades an HTTP/1.1 connection
	if tlsOpts {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: opts.InsecureSkipVerify}
		if opts.CA != nil {
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(opts.CA) {
				return nil, errors.New("the CA file holds no PEM certificate")
			}
		}
		transport.TLSClientConfig = cfg
	}
	return &Client{http: &http.Client{Transport: transport}, base: strings.TrimSuffix(server, "/"), token: token}, nil
}

// Pods lists every pod the daemon runs, with its status (GET /pods).
func (c *Client) Pods(ctx context.Context) (*corev1.PodList, error) {
	var list corev1.PodList
	if err := c.getJSON(ctx, "/pods", nil, &list); err != nil {
		return nil, err
	}
	return &list, nil
}

// Node returns the node the daemon admits pods on (GET /node): its labels, taints,
// capacity, allocatable and Ready condition.
func (c *Client) Node(ctx context.Context) (*corev1.Node, error) {
	var n corev1.Node
	if err := c.getJSON(ctx, "/node", nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// Pod returns one pod with its status; a pod the daemon does not run is a
// *NotFoundError.
func (c *Client) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	var pod corev1.Pod
	err := c.getJSON(ctx, podPath("/pods", namespace, name), nil, &pod)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
		return nil, &NotFoundError{Namespace: namespace, Name: name}
	}
	if err != nil {
		return nil, err
	}
	return &pod, nil
}

// PodsListed returns nil once Pods lists every pod the daemon's sources want (GET
// /readyz/pods): every source has delivered its pods and each has been synced once.
// Before, it returns an *APIError (503) that says what is awaited.
func (c *Client) PodsListed(ctx context.Context) error {
	resp, err := c.get(ctx, "/readyz/pods", nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Events returns a pod's events as the daemon recorded them (GET /events).
func (c *Client) Events(ctx context.Context, namespace, name string) ([]wire.Event, error) {
	var records []wire.Event
	if err := c.getJSON(ctx, "/events", url.Values{"pod": {namespace + "/" + name}}, &records); err != nil {
		return nil, err
	}
	return records, nil
}

// Images returns the runtime's images, with their size, whether a pod needs them and
// when one last did (GET /images).
func (c *Client) Images(ctx context.Context) ([]wire.ImageUse, error) {
	var images []wire.ImageUse
	if err := c.getJSON(ctx, "/images", nil, &images); err != nil {
		return nil, err
	}
	return images, nil
}

// ConfigMaps returns the ConfigMaps the sources provide, with their keys (GET
// /configmaps).
func (c *Client) ConfigMaps(ctx context.Context) ([]wire.Object, error) {
	var objs []wire.Object
	if err := c.getJSON(ctx, "/configmaps", nil, &objs); err != nil {
		return nil, err
	}
	return objs, nil
}

// Secrets returns the Secrets the sources provide, with their keys and never their
// values (GET /secrets).
func (c *Client) Secrets(ctx context.Context) ([]wire.Object, error) {
	var objs []wire.Object
	if err := c.getJSON(ctx, "/secrets", nil, &objs); err != nil {
		return nil, err
	}
	return objs, nil
}

// LogOptions choose which lines Logs returns. The zero value asks for every line of the
// container's current run, once.
type LogOptions struct {
	Follow     bool // keep streaming new lines, across rotations, until ctx is done
	Previous   bool // the container's previous run instead of its current one
	Timestamps bool // prefix each line with its time (RFC3339 with nanoseconds)
	TailLines  *int // only the last lines; nil for all
}

// Logs streams a container's log (GET /containerLogs/...). The caller must close the
// stream; with Follow it ends when ctx is done or the daemon goes away.
func (c *Client) Logs(ctx context.Context, namespace, name, container string, opts LogOptions) (io.ReadCloser, error) {
	q := url.Values{}
	for flag, on := range map[string]bool{"follow": opts.Follow, "previous": opts.Previous, "timestamps": opts.Timestamps} {
		if on {
			q.Set(flag, "1")
		}
	}
	if opts.TailLines != nil {
		q.Set("tailLines", strconv.Itoa(*opts.TailLines))
	}
	resp, err := c.get(ctx, podPath("/containerLogs", namespace, name)+"/"+url.PathEscape(container), q)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// podPath is prefix/namespace/name, escaped.
func podPath(prefix, namespace, name string) string {
	return prefix + "/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

// get sends GET path?query and returns the response of a 2xx answer. Other answers
// become an *APIError carrying the daemon's message.
func (c *Client) get(ctx context.Context, path string, query url.Values) (*http.Response, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.dialError(err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, readAPIError(resp)
}

// getJSON decodes the JSON answer to GET path into out.
func (c *Client) getJSON(ctx context.Context, path string, query url.Values, out any) error {
	resp, err := c.get(ctx, path, query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}
