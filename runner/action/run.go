package action

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Runtime is what an action needs of the container runtime, for the container it runs
// against: runner adapts its Runtime to it for each probe and hook.
type Runtime interface {
	// Exec runs cmd in the container, its output to stdout and stderr, and returns its
	// exit code.
	Exec(ctx context.Context, cmd []string, stdout, stderr io.Writer) (int, error)
	// Dial connects to address from inside the pod's network namespace: the one its
	// sandbox holds, or the host's for a pod without one.
	Dial(ctx context.Context, network, address string) (net.Conn, error)
}

const (
	maxProbeOutput = 10 << 10 // bytes of exec output and HTTP body kept for messages
	maxRedirects   = 10
	probeUserAgent = "kube-probe/staticpod"
	// defaultProbeHost is where a probe without host goes: the pod's own loopback, in
	// its network namespace, or the host's loopback for a host-network pod.
	defaultProbeHost = "127.0.0.1"
)

// Handler is one handler of a probe or hook, as the API spells them apart.
type Handler struct {
	exec    *corev1.ExecAction
	httpGet *corev1.HTTPGetAction
	tcp     *corev1.TCPSocketAction
	grpc    *corev1.GRPCAction
	sleep   *corev1.SleepAction
}

// Probe is the handler of probe p.
func Probe(p *corev1.Probe) Handler {
	return Handler{exec: p.Exec, httpGet: p.HTTPGet, tcp: p.TCPSocket, grpc: p.GRPC}
}

// Hook is the handler of lifecycle hook h.
func Hook(h *corev1.LifecycleHandler) Handler {
	return Handler{exec: h.Exec, httpGet: h.HTTPGet, tcp: h.TCPSocket, sleep: h.Sleep}
}

// Run runs the handler a against container c on rt; ctx bounds it (the probe's timeout,
// the hook's grace). It returns nil on success, else why it failed.
func Run(ctx context.Context, rt Runtime, c *corev1.Container, a Handler) error {
	switch {
	case a.exec != nil:
		return runExec(ctx, rt, a.exec.Command)
	case a.httpGet != nil:
		return runHTTP(ctx, rt, c, a.httpGet)
	case a.tcp != nil:
		return runTCP(ctx, rt, c, a.tcp)
	case a.grpc != nil:
		return runGRPC(ctx, rt, a.grpc)
	case a.sleep != nil:
		select {
		case <-time.After(time.Duration(a.sleep.Seconds) * time.Second):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.New("no action")
}

func runExec(ctx context.Context, rt Runtime, cmd []string) error {
	var out limitedBuffer
	code, err := rt.Exec(ctx, cmd, &out, &out)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("command %q timed out", strings.Join(cmd, " "))
	case err != nil:
		return err
	case code != 0:
		return fmt.Errorf("command %q exited with %d: %s", strings.Join(cmd, " "), code, strings.TrimSpace(out.String()))
	}
	return nil
}

func runHTTP(ctx context.Context, rt Runtime, c *corev1.Container, h *corev1.HTTPGetAction) error {
	port, err := resolvePort(h.Port, c)
	if err != nil {
		return err
	}
	host := h.Host
	if host == "" {
		host = defaultProbeHost
	}
	u := &url.URL{Scheme: strings.ToLower(string(h.Scheme)), Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: h.Path}
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	if i := strings.IndexByte(h.Path, '?'); i >= 0 {
		u.Path, u.RawQuery = h.Path[:i], h.Path[i+1:]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", probeUserAgent)
	req.Header.Set("Accept", "*/*")
	for _, hdr := range h.HTTPHeaders {
		if strings.EqualFold(hdr.Name, "Host") {
			req.Host = hdr.Value
			continue
		}
		req.Header.Add(hdr.Name, hdr.Value)
	}
	resp, err := httpClient(rt, u.Hostname()).Do(req)
	if err != nil {
		return fmt.Errorf("get %q: %w", u.String(), unwrapURLError(err))
	}
	defer resp.Body.Close()
	var body limitedBuffer
	body.drain(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

// httpClient dials through the pod's network namespace, does not verify certificates
// (as the kubelet does not), and follows redirects only to the same host: a redirect
// elsewhere ends the probe with the redirect's status, which counts as success.
func httpClient(rt Runtime, host string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return rt.Dial(ctx, network, addr)
			},
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet's prober
			DisableKeepAlives: true,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects || req.URL.Hostname() != host {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}

func runTCP(ctx context.Context, rt Runtime, c *corev1.Container, a *corev1.TCPSocketAction) error {
	port, err := resolvePort(a.Port, c)
	if err != nil {
		return err
	}
	host := a.Host
	if host == "" {
		host = defaultProbeHost
	}
	conn, err := rt.Dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("dial tcp %s:%d: %w", host, port, errors.Unwrap(err))
	}
	return conn.Close()
}

func runGRPC(ctx context.Context, rt Runtime, g *corev1.GRPCAction) error {
	addr := net.JoinHostPort(defaultProbeHost, strconv.Itoa(int(g.Port)))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return rt.Dial(ctx, "tcp", a)
		}),
		grpc.WithUserAgent(probeUserAgent))
	if err != nil {
		return fmt.Errorf("grpc health check %s: %w", addr, err)
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return fmt.Errorf("grpc health check %s: %w", addr, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("service unhealthy (responded with %q)", resp.GetStatus())
	}
	return nil
}

// resolvePort turns a probe's port (a number or the name of one of the container's
// ports) into a number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, p.StrVal)
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// limitedBuffer keeps the first maxProbeOutput bytes written to it; an exec's stdout
// and stderr write to it from two goroutines.
type limitedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxProbeOutput - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// drain reads r up to the buffer's limit, so that a keep-alive-less connection ends
// cleanly.
func (b *limitedBuffer) drain(r io.Reader) {
	io.Copy(b, io.LimitReader(r, maxProbeOutput))
}
