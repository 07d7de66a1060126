package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	spcli "github.com/staticpod/staticpod/cli"
)

// probedPod is a pod whose readiness probe passes once script has made /tmp/ready.
func probedPod(name, script string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + e2eImage + `
    command: ["sh", "-c", "trap 'exit 0' TERM; ` + script + `; while true; do sleep 0.1; done"]
    readinessProbe: {exec: {command: [test, -e, /tmp/ready]}, periodSeconds: 1}
`
}

// TestWaitExitsAsThePodsBecomeReadyOrNot runs `staticpod wait` as a boot health check
// would: started with the daemon, before its socket exists, on a pod that becomes Ready
// after a few seconds and on one that never does.
func TestWaitExitsAsThePodsBecomeReadyOrNot(t *testing.T) {
	n := newNode(t)
	n.write("late.yaml", probedPod("late", "sleep 3; touch /tmp/ready"))
	n.write("never.yaml", probedPod("never", "true"))
	api := []string{"--api-socket", n.path("staticpod.sock")}
	n.start()

	out, errOut, code := runSplit(t, "", nil, append([]string{"wait", "--for=condition=Ready", "--timeout", "60s", "late-node1"}, api...)...)
	if code != 0 || out != "pod/late-node1 condition met\n" {
		t.Fatalf("wait for late-node1: exit %d, stdout %q, stderr %q; want 0 and condition met", code, out, errOut)
	}
	awaitPS(t, api, "late-node1 ", "1/1", "Running")

	out, errOut, code = runSplit(t, "", nil, append([]string{"wait", "--for=condition=Ready", "--timeout", "3s", "never-node1"}, api...)...)
	if code != spcli.ExitInvalid || out != "" || errOut != "wait: timed out waiting for the condition on pods/never-node1\n" {
		t.Errorf("wait for never-node1: exit %d, stdout %q, stderr %q; want 1 and the timeout", code, out, errOut)
	}
	out, errOut, code = runSplit(t, "", nil, append([]string{"wait", "--for=condition=Ready", "--all", "--timeout", "2s"}, api...)...)
	if code != spcli.ExitInvalid || out != "pod/late-node1 condition met\n" || !strings.Contains(errOut, "on pods/never-node1") {
		t.Errorf("wait --all: exit %d, stdout %q, stderr %q; want 1, late-node1 met, never-node1 timed out", code, out, errOut)
	}

	if err := os.Remove(filepath.Join(n.manifests, "never.yaml")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runSplit(t, "", nil, append([]string{"wait", "--for=delete", "--timeout", "60s", "never-node1"}, api...)...)
	if code != 0 || out != "pod/never-node1 condition met\n" && out != "" {
		t.Errorf("wait --for=delete: exit %d, stdout %q, stderr %q; want 0", code, out, errOut)
	}
}
