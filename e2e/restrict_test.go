package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/restrict"
)

// With restrictions by source, the file source's pod gets the host's PID namespace and
// the pushed one asking for it is refused: Failed, reason Forbidden, a message and an
// event naming the flag, no container; so is a file's pod whose host path lies outside
// --allowed-host-paths. A pod that runs is stopped when staticpod restarts with a
// restriction that forbids it.
func TestRestrictedSources(t *testing.T) {
	n := newNode(t)
	sp := n.start("--host-pid-sources", "file", "--allowed-host-paths", n.path("allowed"))
	n.write("hostpid.yaml", podManifest("hostpid", "Always", "sleep 3600", "  hostPID: true\n"))
	n.write("etc.yaml", podManifest("etc", "Always", "sleep 3600", "  volumes: [{name: etc, hostPath: {path: /etc}}]\n"))
	n.await("the file's pod with the host's PID namespace", time.Minute, running("hostpid-node1/main/0"))
	body := podManifest("pushedpid", "Always", "sleep 3600", "  hostPID: true\n")
	req, _ := http.NewRequest(http.MethodPut, "http://staticpod/manifests/pushedpid", strings.NewReader(body))
	resp, err := socketClient(n.path("staticpod.sock")).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT = %d %s", resp.StatusCode, out)
	}

	for name, want := range map[string]string{
		"pushedpid-node1": `Pod was rejected: spec.hostPID: the host's PID namespace is not allowed for pods from source "api" (--host-pid-sources)`,
		"etc-node1":       "Pod was rejected: spec.volumes[0].hostPath.path: host path /etc is outside --allowed-host-paths",
	} {
		p := n.awaitPhase(name, corev1.PodFailed)
		if p.Status.Reason != restrict.ReasonForbidden || p.Status.Message != want {
			t.Errorf("%s: reason %q, message %q; want %s, %q", name, p.Status.Reason, p.Status.Message, restrict.ReasonForbidden, want)
		}
		api := []string{"--api-socket", n.path("staticpod.sock")}
		awaitPS(t, api, name+" ", "Forbidden")
		if out, _, _ := runSplit(t, "", nil, append([]string{"describe", name}, api...)...); !strings.Contains(out, "Warning  Forbidden") || !strings.Contains(out, want) {
			t.Errorf("describe %s does not say why it was refused:\n%s", name, out)
		}
	}
	if cs := n.containers(); len(cs) != 1 {
		t.Errorf("containers %v, want the file's hostPID pod's only", summary(cs))
	}

	// Restarted with a restriction that forbids it, a pod that runs is stopped.
	sp.stop()
	n.start("--host-pid-sources", "api")
	p := n.awaitPhase("hostpid-node1", corev1.PodFailed)
	if p.Status.Reason != restrict.ReasonForbidden {
		t.Errorf("hostpid-node1 after the restart: reason %q, want %s", p.Status.Reason, restrict.ReasonForbidden)
	}
	n.await("the forbidden pod stopped", time.Minute, func(cs map[string]runner.Container) bool {
		c, ok := cs["hostpid-node1/main/0"]
		return !ok || c.State != runner.StateRunning
	})
}
