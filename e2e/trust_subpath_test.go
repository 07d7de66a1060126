package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
)

// subPathAttackPod is a pod whose init container makes the subPath "sub" of the
// emptyDir it shares with the pod's container a symlink to target, a host directory;
// the container mounts that subPath and lists it.
func subPathAttackPod(target string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: subpath
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: shared, emptyDir: {}}]
  initContainers:
  - name: attacker
    image: %[1]s
    command: ["sh", "-c", "ln -s %[2]s /shared/sub"]
    volumeMounts: [{name: shared, mountPath: /shared}]
  containers:
  - name: victim
    image: %[1]s
    command: ["sh", "-c", "ls -A /sub; exec sleep 3600"]
    volumeMounts: [{name: shared, mountPath: /sub, subPath: sub}]
`, e2eImage, target)
}

// A container that makes a subPath of its pod's emptyDir a symlink to a host directory
// does not get the other container that mounts the subPath the host directory: that
// container is refused as the kubelet refuses it (CreateContainerConfigError, "failed
// to prepare subPath", in its status and an event) and never created.
func TestTrustSubPathSymlinkToTheHostIsRefused(t *testing.T) {
	n := newNode(t)
	n.start()
	host := n.path("host-secret")
	if err := os.MkdirAll(host, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "marker"), []byte("host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.write("subpath.yaml", subPathAttackPod(host))

	want := `failed to prepare subPath for volumeMount "shared" of container "victim"`
	var st corev1.ContainerStatus
	defer func() { // runs as a failed Await ends the test: show the status instead
		if st.State.Waiting == nil {
			t.Logf("victim: %+v", st)
		}
	}()
	testenv.Await(t, "victim waiting with CreateContainerConfigError", time.Minute, func() bool {
		for _, s := range n.pods()["subpath-node1"].Status.ContainerStatuses {
			if s.Name == "victim" {
				st = s
			}
		}
		return st.State.Waiting != nil && st.State.Waiting.Reason == "CreateContainerConfigError"
	})
	if msg := st.State.Waiting.Message; !strings.Contains(msg, want) {
		t.Errorf("victim's waiting message %q, want it to say %q", msg, want)
	}
	n.awaitEvent("Failed", want)
	for key := range n.containers() {
		if strings.HasPrefix(key, "subpath-node1/victim/") {
			t.Errorf("container %s was created; it must be refused before", key)
		}
	}

	// A subPath that stays in the volume is mounted, through a mount point in the pod's
	// dir that goes with the pod.
	n.write("subpath.yaml", strings.ReplaceAll(subPathAttackPod(host), "ln -s "+host+" /shared/sub", "mkdir /shared/sub; echo in > /shared/sub/file"))
	n.await("the victim running on its subPath", time.Minute, running("subpath-node1/victim/0"))
	if m := mountPoints(t, n.path("root/pods")); !slicesContainSuffix(m, "/volume-subpaths/shared/victim/0") {
		t.Errorf("mounts under the pods' dirs = %v, want the subPath's mount point", m)
	}
	n.removeAndAwaitGone("subpath.yaml")
	testenv.Await(t, "no mount left under the pods' dirs", 30*time.Second, func() bool {
		return len(mountPoints(t, n.path("root/pods"))) == 0
	})
}

func slicesContainSuffix(list []string, suffix string) bool {
	for _, s := range list {
		if strings.HasSuffix(s, suffix) {
			return true
		}
	}
	return false
}
