package httpsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Defaults of the URL source.
const (
	DefaultPeriod  = 20 * time.Second // --http-check-frequency, as on the kubelet
	DefaultTimeout = 10 * time.Second // one request, body included
	MaxRedirects   = 5                // redirects followed before a poll fails
	userAgent      = "staticpod"
)

// errTooLarge is a body over the source's cap.
var errTooLarge = errors.New("body too large")

// response is what one poll of the URL got. NotModified is a 304; otherwise Body holds
// the whole 2xx body and the validators to send next time.
type response struct {
	NotModified  bool
	Body         []byte
	ETag         string
	LastModified string
}

// validators are the conditional-request headers of the last good body: the server
// answers 304 while its content is still that body.
type validators struct {
	ETag         string
	LastModified string
}

// newClient builds the source's HTTP client: a per-request timeout, at most
// MaxRedirects redirects, and TLS trusting the system roots plus the PEM certificates
// of caFile. Go's client already drops Authorization and Cookie headers on a redirect
// to another host.
func newClient(caFile string, timeout time.Duration) (*http.Client, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		roots, err := rootsWith(caFile)
		if err != nil {
			return nil, err
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return fmt.Errorf("stopped after %d redirects", MaxRedirects)
			}
			// Pods from a URL run as root on the host: what came over https must not be
			// handed to plain http by a redirect, where anyone on the path can change it.
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("refused a redirect from https to %s", req.URL.Scheme)
			}
			return nil
		},
	}, nil
}

// rootsWith returns the system roots with the certificates of caFile added.
func rootsWith(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA file %s: %w", caFile, err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool() // no system roots on this machine: the CA file alone
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("read CA file %s: no PEM certificate in it", caFile)
	}
	return roots, nil
}

// fetch makes one conditional GET of rawURL. Errors never hold header values nor the
// URL (see cleanError): the source names its URL itself, as publicURL writes it.
func fetch(ctx context.Context, c *http.Client, rawURL string, headers http.Header, v validators, maxBytes int64) (response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return response{}, fmt.Errorf("build request: %w", err)
	}
	setHeaders(req, headers)
	if v.ETag != "" {
		req.Header.Set("If-None-Match", v.ETag)
	}
	if v.LastModified != "" {
		req.Header.Set("If-Modified-Since", v.LastModified)
	}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, cleanError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified {
		return response{NotModified: true}, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // let the connection be reused
		return response{}, fmt.Errorf("server answered %s", resp.Status)
	}
	body, err := readBody(resp, maxBytes)
	if err != nil {
		return response{}, err
	}
	return response{Body: body, ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified")}, nil
}

// setHeaders copies the configured headers onto req. Host is the one header Go takes
// from a field rather than from the map.
func setHeaders(req *http.Request, headers http.Header) {
	for k, vs := range headers {
		if k == "Host" && len(vs) > 0 {
			req.Host = vs[0]
			continue
		}
		req.Header[k] = append([]string(nil), vs...)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
}

// readBody reads at most maxBytes of the body, refusing a longer one.
func readBody(resp *http.Response, maxBytes int64) ([]byte, error) {
	if resp.ContentLength > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d are read", errTooLarge, resp.ContentLength, maxBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", cleanError(err))
	}
	if int64(len(body)) > maxBytes {
		return nil, fmt.Errorf("%w: over %d bytes", errTooLarge, maxBytes)
	}
	return body, nil
}

// cleanError strips the "Get \"<url>\": " that net/http puts in front of its errors:
// the source logs its URL (without credentials) once, as an attribute.
func cleanError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// publicURL is the URL as logged and as the pods' source location (the
// staticpod.io/config.location annotation, so /pods, ps and describe): without its user
// information, with every query parameter's value (or a bare parameter, `?s3cret`)
// replaced by redacted, the keys kept, and with its fragment redacted too, for any of
// them may hold a password or a token. A URL with none of them is kept as written.
func publicURL(u *url.URL, raw string) string {
	query, redactedQuery := redactQuery(u.RawQuery)
	if u.User == nil && !redactedQuery && u.Fragment == "" {
		return raw
	}
	c := *u
	c.User = nil
	c.RawQuery = query
	if c.Fragment != "" {
		c.Fragment, c.RawFragment = redacted, ""
	}
	return c.String()
}

// identityURL is what the UIDs of the URL's pods hash (manifests.Source.Key): the URL
// without its user information, as staticpod has always hashed it, but with its query
// as written, so that redacting the query where the URL is shown gave no pod a new UID
// (and a restart) on an upgrade.
func identityURL(u *url.URL, raw string) string {
	if u.User == nil {
		return raw
	}
	c := *u
	c.User = nil
	return c.String()
}

// redacted stands for a value kept out of logs and locations.
const redacted = "REDACTED"

// redactQuery replaces the value of each parameter of a raw query with redacted, and a
// parameter without '=' (which may be a token itself) likewise, keeping the keys, their
// order and empty values; changed says whether anything was replaced.
func redactQuery(raw string) (query string, changed bool) {
	if raw == "" {
		return raw, false
	}
	params := strings.Split(raw, "&")
	for i, p := range params {
		key, value, ok := strings.Cut(p, "=")
		switch {
		case ok && value != "":
			params[i], changed = key+"="+redacted, true
		case !ok && p != "":
			params[i], changed = redacted, true
		}
	}
	return strings.Join(params, "&"), changed
}

// ParseHeaders turns --manifest-url-header flags, each "Key:Value", into a header. A
// key given several times gets several values, in order. Errors name the flag by its
// position and key, never by its value, which may be a token.
func ParseHeaders(flags []string) (http.Header, error) {
	h := http.Header{}
	for i, f := range flags {
		if strings.TrimSpace(f) == "" {
			continue // an empty flag or environment variable sets no header
		}
		key, value, ok := strings.Cut(f, ":")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch {
		case !ok:
			return nil, fmt.Errorf("manifest-url-header #%d: want Key:Value, found no colon", i+1)
		case !validKey(key):
			return nil, fmt.Errorf("manifest-url-header #%d: %q is not a valid header name", i+1, key)
		case strings.ContainsAny(value, "\r\n\x00"):
			return nil, fmt.Errorf("manifest-url-header #%d (%s): the value holds a line break or NUL", i+1, key)
		}
		h.Add(key, value)
	}
	return h, nil
}

// validKey reports whether key is an HTTP token (RFC 9110, section 5.6.2).
func validKey(key string) bool {
	if key == "" {
		return false
	}
	for _, r := range key {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}
