package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// runtimeClassManifest is a RuntimeClass beside a pod that names it, in one file.
func runtimeClassManifest(class, handler, pod, extra string) string {
	return "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: " + class + "}\nhandler: " + handler + "\n" + extra +
		"---\n" + podManifest(pod, "Always", "sleep 3600", "  runtimeClassName: "+class+"\n")
}

// A pod whose RuntimeClass names a handler the node does not have waits with the
// sandbox's error, which names spec.runtimeClassName, the class and the handler, and an
// event tells it, as the kubelet tells a sandbox it could not create; a pod of a
// handler the node has (crun, with the class's overhead) runs, and describe counts the
// overhead in its Pod Limits.
func TestRuntimeClassesThroughTheBinary(t *testing.T) {
	crun, err := testenv.CrunHandler(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t)
	n.start("--runtime-handler", crun)
	n.write("ghost.yaml", runtimeClassManifest("ghost", "runsc", "ghost", ""))
	n.write("light.yaml", strings.Replace(runtimeClassManifest("light", "crun", "light", "overhead: {podFixed: {memory: 8Mi}}\n"),
		"    command:", "    resources: {limits: {memory: 24Mi}}\n    command:", 1))
	const want = `spec.runtimeClassName: no runtime for "runsc" is configured: RuntimeClass ghost names handler runsc, which is not one of this node's (crun, runc); ` +
		`add it with --runtime-handler runsc=<OCI runtime binary or containerd runtime type>, or to containerd's CRI runtimes`
	var st corev1.ContainerStatus
	testenv.Await(t, "ghost waiting for its sandbox", time.Minute, func() bool {
		if p, ok := n.pods()["ghost-"+e2eNode]; ok && len(p.Status.ContainerStatuses) == 1 {
			st = p.Status.ContainerStatuses[0]
		}
		return st.State.Waiting != nil && st.State.Waiting.Reason == runner.ReasonCreatePodSandboxError
	})
	if got := st.State.Waiting.Message; got != "Failed to create pod sandbox: "+want {
		t.Errorf("waiting message =\n%s\nwant\nFailed to create pod sandbox: %s", got, want)
	}
	out, _, _ := runSplit(t, "", nil, "describe", "ghost-"+e2eNode, "--api-socket", n.path("staticpod.sock"))
	if !strings.Contains(out, "FailedCreatePodSandBox") || !strings.Contains(out, `no runtime for "runsc" is configured: RuntimeClass ghost`) {
		t.Errorf("describe ghost does not tell why:\n%s", out)
	}
	n.await("light running", time.Minute, running("light-"+e2eNode+"/main/0"))
	out, _, _ = runSplit(t, "", nil, "describe", "light-"+e2eNode, "--api-socket", n.path("staticpod.sock"))
	if !strings.Contains(out, "Pod Limits:") || !strings.Contains(out, "memory=32Mi") {
		t.Errorf("describe light: want Pod Limits memory=32Mi (24Mi + the class's 8Mi):\n%s", out)
	}
}
