package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	corev1 "k8s.io/api/core/v1"
)

// staticpod given containerd's socket as the kubelet spells it, a unix:// URL, and
// through a symlinked directory (as /var/run links to /run) runs pods, and knows the
// shims containerd started with its own spelling of the socket for its own: a
// container whose task containerd forgot (its bundle removed across a restart of
// containerd) is ended in its shim, and the pod runs again.
func TestRuntimeEndpointURLThroughASymlinkEndsALostShim(t *testing.T) {
	d := testenv.Start(t) // its own: the test stops it
	n := newNodeOn(t, d)
	links, err := os.MkdirTemp("", "sp-link-") // short: a socket's path has a limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(links) })
	link := filepath.Join(links, "run")
	if err := os.Symlink(filepath.Dir(d.Address), link); err != nil {
		t.Fatal(err)
	}
	args := n.runArgs()
	i := slices.Index(args, "--containerd-address")
	args[i], args[i+1] = "--container-runtime-endpoint", "unix://"+filepath.Join(link, filepath.Base(d.Address))
	n.launch(binary, append(args, "--cni-conf-dir", ""))

	n.write("web.yaml", podManifest("web", "Always", "sleep 3600", "  hostNetwork: true\n"))
	first := n.await("the pod running", time.Minute, running("web-node1/main/0"))["web-node1/main/0"]
	// And staticpod heard that it started: a start whose answer the halt of containerd
	// cuts off is a start that failed, to staticpod, and its next try is attempt 0 again.
	n.awaitPhase("web-node1", corev1.PodRunning)
	shims := n.shimPIDs()
	if len(shims) != 1 {
		t.Fatalf("shims %v, want the pod's one", shims)
	}
	t.Cleanup(func() {
		for pid := range shims {
			syscall.Kill(pid, syscall.SIGKILL) // if all else failed
		}
	})

	// containerd restarted without the task's bundle: it no longer knows the shim.
	if err := d.Halt(); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(d.State(), "io.containerd.runtime.v2.task", n.ns, first.ID)
	syscall.Unmount(filepath.Join(bundle, "rootfs"), syscall.MNT_DETACH)
	if err := os.RemoveAll(bundle); err != nil {
		t.Fatal(err)
	}
	if err := d.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	testenv.Await(t, "the lost shim and its container ended", time.Minute, func() bool {
		for pid := range shims {
			if syscall.Kill(pid, 0) == nil {
				return false
			}
		}
		return syscall.Kill(int(first.PID), 0) != nil
	})
	n.await("the pod running again", time.Minute, running("web-node1/main/1"))
}
