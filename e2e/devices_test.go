package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner/devices/plugintest"
)

// widgetManifest is a pod whose container asks for n devices of the test plugin.
func widgetManifest(name string, n int) string {
	return podManifest(name, "Always", "sleep 3600") + "    resources:\n      limits:\n        example.com/widget: " + string(rune('0'+n)) + "\n"
}

// mustRegisterPlugin registers p on the daemon's kubelet.sock once it serves one.
func mustRegisterPlugin(t *testing.T, p *plugintest.Plugin) {
	t.Helper()
	testenv.Await(t, "the device plugin registered", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return p.Register(ctx) == nil
	})
}

func TestDevicePluginsDevicesReachPodsAndSurviveAKill(t *testing.T) {
	n := newNode(t)
	dir := n.path("device-plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sp := n.start("--device-plugin-dir", dir)
	p := plugintest.New(dir, "example.com/widget", "widget.sock", "widget0", "widget1")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	mustRegisterPlugin(t, p)
	sp.awaitLog("device plugin devices")

	n.write("one.yaml", widgetManifest("one", 1))
	n.awaitPhase("one-node1", corev1.PodRunning)
	const look = "echo $WIDGET_DEVICES; ls /dev/widget*"
	if out, code := n.execIn("one-node1", "sh", "-c", look); code != 0 || out != "widget0\n/dev/widget0\n" {
		t.Errorf("pod one sees %q (exit %d), want widget0 and /dev/widget0", out, code)
	}

	n.write("two.yaml", widgetManifest("two", 2))
	two := n.awaitPhase("two-node1", corev1.PodFailed)
	const wantMsg = "Allocate failed due to requested number of devices unavailable for example.com/widget. Requested: 2, Available: 1, which is unexpected"
	if two.Status.Reason != "UnexpectedAdmissionError" || two.Status.Message != wantMsg {
		t.Errorf("pod two: %s: %s; want UnexpectedAdmissionError: %s", two.Status.Reason, two.Status.Message, wantMsg)
	}
	n.awaitEvent("UnexpectedAdmissionError", "Requested: 2, Available: 1")

	sp.kill9()
	sp = n.start("--device-plugin-dir", dir)
	mustRegisterPlugin(t, p) // as a plugin does when kubelet.sock comes back
	sp.awaitLog("healthy=2") // its ListAndWatch answered: pod three is admitted against both devices
	n.write("three.yaml", widgetManifest("three", 2))
	three := n.awaitPhase("three-node1", corev1.PodFailed)
	if three.Status.Message != wantMsg {
		t.Errorf("pod three after the kill: %s, want %s", three.Status.Message, wantMsg)
	}
	if out, code := n.execIn("one-node1", "sh", "-c", look); code != 0 || out != "widget0\n/dev/widget0\n" {
		t.Errorf("pod one after the kill sees %q (exit %d), want widget0 and /dev/widget0", out, code)
	}
	if got := len(p.Allocated()); got != 1 {
		t.Errorf("Allocate calls = %v, want only pod one's", p.Allocated())
	}

	for _, f := range []string{"three.yaml", "one.yaml"} {
		if err := os.Remove(filepath.Join(n.manifests, f)); err != nil {
			t.Fatal(err)
		}
	}
	n.awaitPhase("two-node1", corev1.PodRunning)
	out, code := n.execIn("two-node1", "sh", "-c", look)
	if code != 0 || out != "widget0,widget1\n/dev/widget0\n/dev/widget1\n" {
		t.Errorf("pod two sees %q (exit %d), want both widgets", out, code)
	}
	if !strings.Contains(sp.out.String(), "devices freed") {
		t.Errorf("staticpod's log does not say the devices were freed")
	}
}
