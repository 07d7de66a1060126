package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A token in the manifest URL's query is sent to the server and shown nowhere: not in
// the daemon's log, /pods, `ps -o wide`, `ps -o json` or `describe`, which name the URL
// with its query values redacted.
func TestManifestURLTokenShownNowhere(t *testing.T) {
	n := newNode(t)
	ms := &manifestServer{body: podManifest("fleet", "Always", "sleep 3600")}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("token") != "s3cret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		ms.ServeHTTP(w, r)
	}))
	defer srv.Close()
	sp := n.start("--manifest-url", srv.URL+"/pods?token=s3cret", "--http-check-frequency", "200ms")
	n.awaitPhase("fleet-node1", corev1.PodRunning) // in /pods, not only in containerd
	public := srv.URL + "/pods?token=REDACTED"

	api := []string{"--api-socket", n.path("staticpod.sock")}
	_, pods := n.apiGet("/pods")
	shown := map[string]string{"/pods": string(pods)}
	for _, args := range [][]string{{"ps", "-o", "wide"}, {"ps", "-o", "json"}, {"describe", "fleet-node1"}} {
		out, errOut, code := runSplit(t, "", nil, append(args, api...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", strings.Join(args, " "), code, errOut)
		}
		shown[strings.Join(args, " ")] = out + errOut
	}
	shown["the daemon's log"] = sp.out.String()
	for what, out := range shown {
		if strings.Contains(out, "s3cret") {
			t.Errorf("%s shows the URL's token:\n%s", what, out)
		}
		if what != "the daemon's log" && !strings.Contains(out, public) {
			t.Errorf("%s does not name the URL as %s:\n%s", what, public, out)
		}
	}
	if !strings.Contains(shown["describe fleet-node1"], "url:"+public) {
		t.Errorf("describe does not give the source as url:%s:\n%s", public, shown["describe fleet-node1"])
	}
}
