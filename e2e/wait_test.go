package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/internal/testenv"
)

// bootImage is the image of TestWaitExitsAsThePodsBecomeReadyOrNot, in --image-dir.
const bootImage = "docker.io/library/boot:1"

// probedPod is a pod of bootImage whose readiness probe passes once script has made
// /tmp/ready.
func probedPod(name, script string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + bootImage + `
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; ` + script + `; while true; do sleep 0.1; done"]
    readinessProbe: {exec: {command: [test, -e, /tmp/ready]}, periodSeconds: 1}
`
}

// TestWaitExitsAsThePodsBecomeReadyOrNot runs `staticpod wait` as a boot health check
// would: started with the daemon, before its socket exists and while it imports the
// image of its pod from --image-dir (the pod is not listed until then), on a pod that
// becomes Ready after a few seconds; then on one that never does.
func TestWaitExitsAsThePodsBecomeReadyOrNot(t *testing.T) {
	n := newNode(t)
	images := n.path("images")
	archive, err := testenv.BuildImage(testenv.ImageOptions{Ref: bootImage})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(images, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(images, "boot.tar"), archive, 0o644); err != nil {
		t.Fatal(err)
	}
	n.write("late.yaml", probedPod("late", "sleep 3; touch /tmp/ready"))
	api := []string{"--api-socket", n.path("staticpod.sock")}
	n.start("--image-dir", images)

	out, errOut, code := runSplit(t, "", nil, append([]string{"wait", "--for=condition=Ready", "--all", "--timeout", "60s"}, api...)...)
	if code != 0 || out != "pod/late-node1 condition met\n" {
		t.Fatalf("wait --all at start: exit %d, stdout %q, stderr %q; want 0 and late-node1 met", code, out, errOut)
	}
	awaitPS(t, api, "late-node1 ", "1/1", "Running")
	out, errOut, code = runSplit(t, "", nil, append([]string{"wait", "--for=condition=Ready", "--timeout", "0", "late-node1"}, api...)...)
	if code != 0 || out != "pod/late-node1 condition met\n" {
		t.Errorf("wait --timeout 0 on a Ready pod: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	n.write("never.yaml", probedPod("never", "true"))
	awaitPS(t, api, "never-node1 ", "0/1", "Running")

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

	// A pod whose image pull hangs is not listed until the pull ends: --all waits for it
	// all the same, and names what it waited for.
	registry, pulling := silentRegistry(t)
	n.write("stuck.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: stuck}\nspec:\n  containers:\n  - {name: main, image: "+registry+"/stuck:1}\n")
	select {
	case <-pulling:
	case <-time.After(time.Minute):
		t.Fatal("no pull from the silent registry in a minute")
	}
	out, errOut, code = runSplit(t, "", nil, append([]string{"wait", "--for=condition=Ready", "--all", "--timeout", "3s"}, api...)...)
	if code != spcli.ExitInvalid || out != "" || !strings.Contains(errOut, "wait: timed out waiting for the condition: pods not synced yet") {
		t.Errorf("wait --all while a pull hangs: exit %d, stdout %q, stderr %q; want 1 and pods not synced", code, out, errOut)
	}
}

// silentRegistry returns the host:port of a listener that takes connections and never
// answers: a pull from it hangs until it is cancelled. pulling is closed at its first
// connection.
func silentRegistry(t *testing.T) (hostPort string, pulling <-chan struct{}) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done, first := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if conns = append(conns, c); len(conns) == 1 {
				close(first)
			}
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String(), first
}
