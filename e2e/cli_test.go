package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// runSplit runs the binary with stdin and extra environment, and returns its stdout,
// stderr and exit code apart.
func runSplit(t *testing.T, stdin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	cmd.Env = append(os.Environ(), env...)
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("run staticpod %v: %v", args, err)
	}
	return out.String(), errOut.String(), 0
}

// twoContainers is a pod with an init container and two app containers.
const twoContainers = `apiVersion: v1
kind: Pod
metadata:
  name: two
  labels: {app: two}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - {name: setup, image: ` + e2eImage + `, command: ["sh", "-c", "echo set up"]}
  containers:
  - {name: a, image: ` + e2eImage + `, command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]}
  - {name: b, image: ` + e2eImage + `, command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]}
`

// TestCLIAgainstTheDaemon runs ps, logs, describe and exec against `staticpod run`.
func TestCLIAgainstTheDaemon(t *testing.T) {
	n := newNode(t)
	n.start()
	n.write("web.yaml", podManifest("web", "Always", "trap 'exit 0' TERM; echo hello from web; echo second line; while true; do sleep 0.1; done"))
	n.write("two.yaml", twoContainers)
	n.await("pods running", time.Minute, func(cs map[string]runner.Container) bool {
		return running("web-node1/main/0")(cs) && running("two-node1/a/0")(cs) && running("two-node1/b/0")(cs)
	})
	api := []string{"--api-socket", n.path("staticpod.sock")}
	awaitPS(t, api, "web-node1 ", "1/1", "Running")

	out, errOut, code := runSplit(t, "", nil, append([]string{"ps", "-o", "json"}, api...)...)
	var list corev1.PodList
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("ps -o json: exit %d (%s), decode: %v\n%s", code, errOut, err, out)
	}
	var web *corev1.Pod
	for i := range list.Items {
		if list.Items[i].Name == "web-node1" {
			web = &list.Items[i]
		}
	}
	if web == nil || web.Status.Phase != corev1.PodRunning || len(web.Status.ContainerStatuses) != 1 || !web.Status.ContainerStatuses[0].Ready ||
		web.Annotations["kubernetes.io/config.source"] != "file" || web.Spec.NodeName != e2eNode {
		t.Errorf("ps -o json: web-node1 = %+v", web)
	}
	out, _, _ = runSplit(t, "", nil, append([]string{"ps", "-o", "wide"}, api...)...)
	if !strings.Contains(out, "file:"+filepath.Join(n.manifests, "web.yaml")) || !strings.Contains(out, "two-node1 ") {
		t.Errorf("ps -o wide lacks the source or a pod:\n%s", out)
	}

	if out, errOut, code := runSplit(t, "", nil, append([]string{"logs", "web-node1"}, api...)...); code != 0 || out != "hello from web\nsecond line\n" {
		t.Errorf("logs web-node1: exit %d (%s), output %q", code, errOut, out)
	}
	if out, _, code := runSplit(t, "", nil, append([]string{"logs"}, append(api, "web-node1", "--tail", "1")...)...); code != 0 || out != "second line\n" {
		t.Errorf("logs web-node1 --tail 1: exit %d, output %q", code, out)
	}
	if out, _, code := runSplit(t, "", nil, append([]string{"logs"}, append(api, "two-node1", "-c", "setup")...)...); code != 0 || out != "set up\n" {
		t.Errorf("logs two-node1 -c setup: exit %d, output %q", code, out)
	}
	if _, errOut, code := runSplit(t, "", nil, append([]string{"logs", "two-node1"}, api...)...); code != spcli.ExitUsage || !strings.Contains(errOut, "its containers: a, b (init: setup)") {
		t.Errorf("logs two-node1 without -c: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runSplit(t, "", nil, append([]string{"describe", "web"}, api...)...); code != spcli.ExitInvalid || !strings.Contains(errOut, "did you mean web-node1?") {
		t.Errorf("describe web: exit %d, %q", code, errOut)
	}

	out, errOut, code = runSplit(t, "", nil, append([]string{"describe", "two-node1"}, api...)...)
	for _, want := range []string{`Name:\s+two-node1\n`, `Namespace:\s+default\n`, `Labels:\s+app=two\n`,
		`Source:\s+file:` + regexp.QuoteMeta(filepath.Join(n.manifests, "two.yaml")) + `\n`, `Init Containers:\n  setup:\n`,
		`State:\s+Terminated\n\s+Reason:\s+Completed\n`, `Containers:\n  a:\n`, `Ready:\s+True\n`, `Events:\n`,
		`Normal\s+Started\s+\S+\s+staticpod\s+Started container b\n`} {
		if code != 0 || !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("describe two-node1 (exit %d, %s) lacks %s:\n%s", code, errOut, want, out)
		}
	}

	args := append(append([]string{"exec"}, api...), "web-node1", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if out, errOut, code := runSplit(t, "", nil, args...); code != 7 || out != "out\n" || errOut != "err\n" {
		t.Errorf("exec: exit %d, stdout %q, stderr %q; want 7, out, err", code, out, errOut)
	}
	args = append(append([]string{"exec"}, api...), "two-node1", "-c", "b", "-i", "--", "cat")
	if out, errOut, code := runSplit(t, "piped in\n", nil, args...); code != 0 || out != "piped in\n" {
		t.Errorf("exec -i cat: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	args = append(append([]string{"exec"}, api...), "web-node1", "--", "no-such-command")
	if _, errOut, code := runSplit(t, "", nil, args...); code != spcli.ExitNotFound {
		t.Errorf("exec no-such-command: exit %d (%s), want 127", code, errOut)
	}
}

// awaitPS runs ps until a line holds every one of want, or fails after 30 s.
func awaitPS(t *testing.T, api []string, want ...string) {
	t.Helper()
	var out, errOut string
	var code int
	found := false
	defer func() { // runs as a failed Await ends the test: show what ps said instead
		if !found {
			t.Logf("ps: exit %d, %s\n%s", code, errOut, out)
		}
	}()
	testenv.Await(t, fmt.Sprintf("ps to show %q", want), 30*time.Second, func() bool {
		out, errOut, code = runSplit(t, "", nil, append([]string{"ps"}, api...)...)
		for _, line := range strings.Split(out, "\n") {
			if containsAll(line, want) {
				return true
			}
		}
		return false
	})
	found = true
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
