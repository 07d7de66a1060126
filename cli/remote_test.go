package cli

import (
	"bytes"
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/staticpod/staticpod/internal/testenv"
)

// tlsDaemon is an HTTPS server of the pod list with a certificate of a CA of the test's
// own, and the file of that CA.
func tlsDaemon(t *testing.T) (url, caFile string) {
	t.Helper()
	files := testenv.NewTLSFiles(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","items":[]}`)
	}))
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused on purpose
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, files.CA
}

func TestRemoteFlagsTrustTheGivenCAOnly(t *testing.T) {
	url, ca := tlsDaemon(t)
	other := testenv.NewTLSFiles(t).CA
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"its CA", []string{"--certificate-authority", ca}, 0, "No pods found."},
		{"any certificate, when told", []string{"--insecure-skip-tls-verify"}, 0, "No pods found."},
		{"another CA", []string{"--certificate-authority", other}, ExitUsage,
			"has a certificate this client does not trust: x509: certificate signed by unknown authority"},
		{"the system's CAs", nil, ExitUsage,
			"certificate signed by unknown authority; give the CA that signed it with --certificate-authority (or STATICPOD_CERTIFICATE_AUTHORITY)"},
		{"a CA and skipping verification", []string{"--certificate-authority", ca, "--insecure-skip-tls-verify"}, ExitUsage,
			"specifying a root certificates file with the insecure flag is not allowed"},
		{"a CA file that holds none", []string{"--certificate-authority", notPEM}, ExitUsage, "the CA file holds no PEM certificate"},
		{"a missing CA file", []string{"--certificate-authority", notPEM + ".gone"}, ExitUsage, "--certificate-authority: open " + notPEM + ".gone"},
	}
	for _, tt := range tests {
		_, errOut, code := runCLI(t, append([]string{"ps", "--server", url}, tt.args...)...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("ps over TLS with %s: exit %d, %q; want %d and %q", tt.name, code, errOut, tt.code, tt.want)
		}
	}
	// A certificate that is not trusted will not be: wait does not try again until its
	// timeout, as it does while no daemon answers.
	if _, errOut, code := runCLI(t, "wait", "--server", url, "--certificate-authority", other, "--for=condition=Ready", "--all", "--timeout", "10m"); code != ExitUsage ||
		!strings.Contains(errOut, "certificate signed by unknown authority") || strings.Contains(errOut, "timed out") {
		t.Errorf("wait over TLS with another CA: exit %d, %q; want 2 at once", code, errOut)
	}
	t.Setenv("STATICPOD_CERTIFICATE_AUTHORITY", ca)
	if _, errOut, code := runCLI(t, "ps", "--server", url); code != 0 {
		t.Errorf("ps over TLS with STATICPOD_CERTIFICATE_AUTHORITY: exit %d, %q", code, errOut)
	}
	plain := "http://" + strings.TrimPrefix(url, "https://")
	if _, errOut, code := runCLI(t, "ps", "--server", plain, "--certificate-authority", ca); code != ExitUsage ||
		!strings.Contains(errOut, "a CA and skipping verification are for https:// servers") {
		t.Errorf("ps over plain http with a CA: exit %d, %q", code, errOut)
	}
}

func TestTokenOverPlainHTTPBeyondLoopbackIsWarnedOf(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const warning = "staticpod: warning: the API token goes to 192.0.2.1:1 over plain http"
	tests := []struct {
		name, server string
		token, warns bool
	}{
		{"a token to another machine", "http://192.0.2.1:1", true, true},
		{"no token", "http://192.0.2.1:1", false, false},
		{"a token to 127.0.0.1", "http://127.0.0.1:1", true, false},
		{"a token to localhost", "http://localhost:1", true, false},
		{"a token to [::1]", "http://[::1]:1", true, false},
	}
	for _, tt := range tests {
		args := []string{"ps", "--server", tt.server}
		if tt.token {
			args = append(args, "--token-file", token)
		}
		if errOut := clientOf(t, args...); strings.Contains(errOut, "warning:") != tt.warns || (tt.warns && !strings.Contains(errOut, warning)) {
			t.Errorf("%s: stderr %q, want a warning: %v", tt.name, errOut, tt.warns)
		}
	}
}

// clientOf makes the client of a command with args, sends nothing (192.0.2.1 answers
// nobody), and returns what it wrote to stderr.
func clientOf(t *testing.T, args ...string) string {
	t.Helper()
	var errOut bytes.Buffer
	app := &cli.App{Name: "staticpod", ErrWriter: &errOut, Writer: io.Discard, Commands: []*cli.Command{{
		Name:  args[0],
		Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			_, err := newClient(c)
			return err
		},
	}}}
	if err := app.Run(append([]string{"staticpod"}, args...)); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return errOut.String()
}
