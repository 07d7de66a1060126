package api

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/api/client"
	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/internal/testenv"
)

// tlsServer runs a server with exec on the socket and on 127.0.0.1 over TLS with files,
// the token s3cret, and returns its https:// URL and what it logs.
func tlsServer(t *testing.T, files testenv.TLSFiles) (base string, log *testenv.Buffer) {
	t.Helper()
	log = &testenv.Buffer{}
	cfg := testConfig(newFakeBackend(execPods()...), nil)
	cfg.Log = slog.New(slog.NewTextHandler(log, nil))
	cfg.Exec = newFakeExecer()
	cfg.Socket, cfg.Listen = socketPath(t), "127.0.0.1:0"
	cfg.TLSCertFile, cfg.TLSKeyFile = files.Cert, files.Key
	cfg.TokenFile = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(cfg.TokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, cfg)
	mustRun(t, s)
	return "https://" + s.tcpAddr.String(), log
}

func tlsClient(t *testing.T, base, token, caFile string) *client.Client {
	t.Helper()
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewTLS(base, token, client.TLSOptions{CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTLSListenerCarriesExecWithTheTokenToClientsOfItsCA(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	base, _ := tlsServer(t, files)
	c := tlsClient(t, base, "s3cret", files.CA)
	resize := make(chan wire.TermSize, 1)
	resize <- wire.TermSize{Width: 100, Height: 30}
	tests := []struct {
		name    string
		opts    client.ExecOptions
		command string
		want    execResult
	}{
		{"output apart, exit code", client.ExecOptions{}, "echo", execResult{Code: 7, Stdout: "out\n", Stderr: "err\n"}},
		{"input to its end", client.ExecOptions{Stdin: strings.NewReader("piped in\n")}, "cat", execResult{Stdout: "piped in\n"}},
		{"terminal size and a resize", client.ExecOptions{TTY: true, Size: &wire.TermSize{Width: 80, Height: 24}, Resize: resize}, "size",
			execResult{Stdout: "80x24\n100x30\n"}},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		got, _ := runExec(ctx, c, "web-node1", "main", tt.opts, tt.command)
		cancel()
		if got != tt.want {
			t.Errorf("exec over TLS, %s = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if _, err := c.Pods(t.Context()); err != nil {
		t.Errorf("GET /pods over TLS with the token: %v", err)
	}
	var apiErr *client.APIError
	if _, err := tlsClient(t, base, "", files.CA).Pods(t.Context()); !errors.As(err, &apiErr) || apiErr.Code != http.StatusUnauthorized {
		t.Errorf("GET /pods over TLS without the token: %v, want 401", err)
	}
}

func TestTLSClientRefusesACertificateOfAnotherCA(t *testing.T) {
	base, _ := tlsServer(t, testenv.NewTLSFiles(t))
	system, err := client.NewURL(base, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*client.Client{
		"another CA":       tlsClient(t, base, "s3cret", testenv.NewTLSFiles(t).CA),
		"the system's CAs": system,
	} {
		_, err := c.Pods(t.Context())
		var unreachable *client.UnreachableError
		var untrusted *tls.CertificateVerificationError
		if !errors.As(err, &unreachable) || !errors.As(err, &untrusted) ||
			!strings.Contains(err.Error(), "has a certificate this client does not trust: x509: certificate signed by unknown authority") {
			t.Errorf("a client trusting %s: %v, want an untrusted certificate", name, err)
		}
	}
}

func TestPlainHTTPToTheTLSListenerIsAnsweredUseHTTPS(t *testing.T) {
	base, _ := tlsServer(t, testenv.NewTLSFiles(t))
	c, err := client.NewURL("http://"+strings.TrimPrefix(base, "https://"), "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *client.APIError
	if _, err := c.Pods(t.Context()); !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest ||
		!strings.Contains(apiErr.Message, "HTTP request to an HTTPS server") {
		t.Errorf("GET /pods over plain HTTP to the TLS listener: %v, want 400 from an HTTPS server", err)
	}
}

// A renewed certificate is served from the next handshake on, without a restart.
func TestTLSListenerServesARenewedCertificate(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	base, _ := tlsServer(t, files)
	renewed := testenv.NewTLSFiles(t)
	later := time.Now().Add(time.Minute) // another mtime than the first files', whatever the clock's grain
	for from, to := range map[string]string{renewed.Cert: files.Cert, renewed.Key: files.Key} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(to, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tlsClient(t, base, "s3cret", renewed.CA).Pods(t.Context()); err != nil {
		t.Errorf("GET /pods trusting the renewed certificate's CA: %v", err)
	}
}

func TestTLSFlagsAreCheckedAtStart(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	tests := []struct {
		name, listen, cert, key, want string
	}{
		{"a certificate without its key", "127.0.0.1:0", files.Cert, "", "--tls-cert-file and --tls-private-key-file go together"},
		{"a key without its certificate", "127.0.0.1:0", "", files.Key, "--tls-cert-file and --tls-private-key-file go together"},
		{"no TCP listener", "", files.Cert, files.Key, "give --listen too"},
		{"a key that is not the certificate's", "127.0.0.1:0", files.Cert, testenv.NewTLSFiles(t).Key, "private key does not match public key"},
		{"a missing file", "127.0.0.1:0", files.Cert + ".nope", files.Key, "no such file or directory"},
	}
	for _, tt := range tests {
		cfg := testConfig(newFakeBackend(), nil)
		cfg.Socket, cfg.Listen, cfg.TLSCertFile, cfg.TLSKeyFile = socketPath(t), tt.listen, tt.cert, tt.key
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New = %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}

func TestPlainTCPWithATokenBeyondLoopbackIsWarnedOf(t *testing.T) {
	const warning = "the bearer token crosses the network in the clear"
	for listen, warns := range map[string]bool{"127.0.0.1:0": false, "0.0.0.0:0": true} {
		log := &testenv.Buffer{}
		cfg := testConfig(newFakeBackend(), nil)
		cfg.Log = slog.New(slog.NewTextHandler(log, nil))
		cfg.Socket, cfg.Listen = socketPath(t), listen
		cfg.TokenFile = filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(cfg.TokenFile, []byte("s3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		stop := mustRun(t, mustNew(t, cfg))
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(log.String(), warning) != warns {
			t.Errorf("listening on %s: warned %v, want %v:\n%s", listen, !warns, warns, log)
		}
	}
}
