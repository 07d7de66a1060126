package e2e

import (
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
)

// freeTCPAddr returns a loopback address with a port nobody listens on now.
func freeTCPAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// tcpDo sends a request to the daemon's TCP listener at addr, with the bearer token
// when there is one, and returns status and body. It retries while nothing answers:
// the daemon may still be starting.
func tcpDo(t *testing.T, method, addr, path, token, body string) (int, string) {
	t.Helper()
	var code int
	var got []byte
	testenv.Await(t, "the API to answer "+method+" "+path+" on "+addr, 30*time.Second, func() bool {
		req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		code = resp.StatusCode
		got, _ = io.ReadAll(resp.Body)
		return true
	})
	return code, string(got)
}

// Without --api-token-file the TCP listener serves what the kubelet's read-only port
// serves, the pods and health, and refuses the rest (logs, events, pushed manifests,
// profiles, whose cmdline shows the flags) as unauthorized; the socket serves them all.
func TestTCPWithoutTokenServesOnlyPodsAndHealth(t *testing.T) {
	n := newNode(t)
	addr := freeTCPAddr(t)
	sp := n.start("--listen", addr)
	n.write("web.yaml", podManifest("web", "Always", "echo hello from web; sleep 3600"))
	n.awaitPhase("web-node1", corev1.PodRunning)

	for _, path := range []string{"/pods", "/healthz"} {
		if code, body := tcpDo(t, http.MethodGet, addr, path, "", ""); code != http.StatusOK {
			t.Errorf("GET %s over TCP without a token = %d %s, want 200", path, code, body)
		}
	}
	if _, body := tcpDo(t, http.MethodGet, addr, "/pods", "", ""); !strings.Contains(body, `"name":"web-node1"`) {
		t.Errorf("GET /pods over TCP lacks the pod web-node1: %s", body)
	}
	for _, path := range []string{"/manifests", "/containerLogs/default/web-node1/main", "/events", "/debug/pprof/cmdline"} {
		code, body := tcpDo(t, http.MethodGet, addr, path, "", "")
		if code != http.StatusUnauthorized {
			t.Errorf("GET %s over TCP without a token = %d %s, want 401", path, code, body)
		}
		if strings.Contains(body, "hello from web") || strings.Contains(body, "--pod-manifest-path") {
			t.Errorf("GET %s over TCP without a token served what it guards: %s", path, body)
		}
	}
	// The container writes its line once it runs, a moment after the pod is Running.
	var code int
	var body []byte
	testenv.Await(t, "the log over the socket", time.Minute, func() bool {
		code, body = n.apiGet("/containerLogs/default/web-node1/main")
		return code != http.StatusOK || strings.Contains(string(body), "hello from web")
	})
	if code != http.StatusOK || !strings.Contains(string(body), "hello from web") {
		t.Errorf("GET the logs over the socket = %d %s, want 200 with the log", code, body)
	}
	// Written as the listener started, before it answered.
	if warning := "the TCP listener has no --api-token-file: it serves /healthz, /readyz, /metrics and /pods"; !strings.Contains(sp.out.String(), warning) {
		t.Errorf("staticpod did not warn %q", warning)
	}
}

// A pushed Secret's values are not served back: GET /manifests/{name} masks them and
// keeps the keys, and neither the events nor a refused push quote a value that does not
// decode; the pod that reads the Secret runs with it all the same.
func TestPushedSecretIsServedWithoutItsValues(t *testing.T) {
	n := newNode(t)
	const token, value, clear = "e2e-token", "e2e-hunter2-value", "e2e-clear-text-value"
	tokenFile := n.path("token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeTCPAddr(t)
	n.start("--listen", addr, "--api-token-file", tokenFile)

	manifest := `apiVersion: v1
kind: Secret
metadata:
  name: db
data:
  password: ` + base64.StdEncoding.EncodeToString([]byte(value)) + `
stringData:
  user: ` + value + `-user
---
apiVersion: v1
kind: Pod
metadata:
  name: reader
spec:
  containers:
  - name: main
    image: ` + e2eImage + `
    command: ["sh", "-c", "echo password of ${#PASSWORD} bytes; sleep 3600"]
    env:
    - name: PASSWORD
      valueFrom:
        secretKeyRef: {name: db, key: password}
`
	if code, body := tcpDo(t, http.MethodPut, addr, "/manifests/db", token, manifest); code != http.StatusOK {
		t.Fatalf("PUT /manifests/db over TCP with the token = %d %s", code, body)
	}
	n.awaitPhase("reader-node1", corev1.PodRunning)
	awaitLogLine(t, n, "/containerLogs/default/reader-node1/main", fmt.Sprintf("password of %d bytes", len(value)))

	code, body := tcpDo(t, http.MethodGet, addr, "/manifests/db", token, "")
	if code != http.StatusOK || strings.Contains(body, value) || strings.Contains(body, base64.StdEncoding.EncodeToString([]byte(value))) {
		t.Errorf("GET /manifests/db = %d, serves the Secret's values:\n%s", code, body)
	}
	for _, want := range []string{"password: '***'", "user: '***'", "name: reader"} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /manifests/db lacks %q:\n%s", want, body)
		}
	}

	bad := "apiVersion: v1\nkind: Secret\nmetadata: {name: clear}\ndata:\n  password: " + clear + "\n"
	if code, body := tcpDo(t, http.MethodPut, addr, "/manifests/clear", token, bad); code != http.StatusUnprocessableEntity || strings.Contains(body, clear) {
		t.Errorf("PUT of a Secret whose value is not base64 = %d %s, want 422 that does not quote the value", code, body)
	}
	n.write("clear.yaml", bad)
	n.awaitEvent("InvalidManifest", "data[password]")
	if _, body := tcpDo(t, http.MethodGet, addr, "/events", token, ""); strings.Contains(body, clear) || strings.Contains(body, value) {
		t.Errorf("GET /events quotes a Secret's value:\n%s", body)
	}
}

// awaitLogLine waits until the container log at path (over the socket) holds want.
func awaitLogLine(t *testing.T, n *node, path, want string) {
	t.Helper()
	testenv.Await(t, "the log "+path+" to say "+want, 30*time.Second, func() bool {
		code, body := n.apiGet(path)
		return code == http.StatusOK && strings.Contains(string(body), want)
	})
}
