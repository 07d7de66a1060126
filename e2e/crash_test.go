package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// A staticpod killed while it creates a container leaves a part of the creation behind.
// Whatever the step it stopped after, the next staticpod runs the pod within seconds and
// ends up with exactly one app container, its first attempt: what never started is
// removed or replaced under its attempt number.
func TestCreationSurvivesACrashAtEveryStep(t *testing.T) {
	for _, step := range []string{"snapshot prepared", "container created", "task created", "task started"} {
		t.Run(step, func(t *testing.T) {
			n := newNode(t)
			manifest := podManifest("rel", "Always", "sleep 3600")
			n.leaveHalfCreated(manifest, "rel.yaml", step)
			n.write("rel.yaml", manifest)
			restarted := time.Now()
			n.start()
			n.await("the pod running", time.Minute, func(cs map[string]runner.Container) bool {
				for _, c := range cs {
					if c.PodName == "rel-node1" && c.State == runner.StateRunning && !c.StartedAt.IsZero() {
						return true
					}
				}
				return false
			})
			if took := time.Since(restarted); took > 10*time.Second {
				t.Errorf("the pod ran %v after the restart; want a few seconds", took.Round(time.Millisecond))
			}
			// Housekeeping (every 2 s) removes a replaced attempt that never started.
			cs := n.await("one app container left", 10*time.Second, func(cs map[string]runner.Container) bool {
				return len(cs) == 1
			})
			// Nothing ran before: the container that runs is the first attempt, and
			// the pod's status counts no restart.
			if _, ok := cs["rel-node1/main/0"]; !ok {
				t.Errorf("containers %v, want rel-node1/main/0: a container that never ran counted as a restart", summary(cs))
			}
		})
	}
}

// leaveHalfCreated leaves in containerd what a staticpod killed during the creation of
// the manifest's first container leaves after step.
func (n *node) leaveHalfCreated(manifest, file, step string) {
	n.t.Helper()
	rt := n.daemonRuntime()
	defer rt.Close()
	created := n.createFirstContainer(rt, manifest, file)
	ctd, err := n.d.Client.LoadContainer(n.ctx, created.ID)
	if err != nil {
		n.t.Fatal(err)
	}
	switch step {
	case "snapshot prepared": // the container's record is not written yet
		// The client prepares the snapshot under a lease that the killed process never
		// released (it expires in 24 h): the snapshot outlives the container's record.
		ls := n.d.Client.LeasesService()
		var l leases.Lease
		if l, err = ls.Create(n.ctx, leases.WithRandomID(), leases.WithExpiration(24*time.Hour)); err == nil {
			if err = ls.AddResource(n.ctx, l, leases.Resource{ID: created.ID, Type: "snapshots/overlayfs"}); err == nil {
				err = ctd.Delete(n.ctx) // keeps the snapshot
			}
		}
	case "task created":
		_, err = ctd.NewTask(n.ctx, cio.NullIO)
	case "task started": // its start time is not recorded yet
		if err = rt.StartContainer(n.ctx, created.ID); err == nil {
			_, err = ctd.SetLabels(n.ctx, map[string]string{"io.staticpod.started-at": ""})
		}
	}
	if err != nil {
		n.t.Fatalf("leave the state after %q: %v", step, err)
	}
}

// awaitHousekeeping waits until the daemon has run its housekeeping (every 2 s, apart
// from relists) once from now. It leaves what a staticpod killed right after creating a
// container leaves, for a pod no manifest wants, and waits until the daemon removed it:
// only housekeeping finds such orphans.
func (n *node) awaitHousekeeping() {
	n.t.Helper()
	rt := n.daemonRuntime()
	defer rt.Close()
	orphan := n.createFirstContainer(rt, podManifest("orphan", "Always", "sleep 3600", "  hostNetwork: true\n"), "orphan.yaml")
	n.await("the daemon's housekeeping to remove an orphan", time.Minute, func(cs map[string]runner.Container) bool {
		for _, c := range cs {
			if c.ID == orphan.ID {
				return false
			}
		}
		return true
	})
}

// daemonRuntime returns a runtime configured as the node's daemon is, to create
// containers the same way; the caller closes it.
func (n *node) daemonRuntime() *containerdrt.Runtime {
	n.t.Helper()
	rt, err := containerdrt.New(n.ctx, containerdrt.Config{
		Address: n.d.Address, Namespace: n.ns, RootDir: n.path("root"), PodLogDir: n.path("log/pods"), Self: binary,
		Log: containerdrt.LogConfig{ContainersDir: n.path("log/containers")},
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return rt
}

// createFirstContainer creates, and does not start, the first container of the pod
// that manifest defines, as if it came from file in the manifest directory.
func (n *node) createFirstContainer(rt *containerdrt.Runtime, manifest, file string) runner.Container {
	n.t.Helper()
	res := manifests.Load([]byte(manifest), manifests.Options{
		NodeName: e2eNode, Source: manifests.Source{Kind: manifests.SourceFile, Location: filepath.Join(n.manifests, file)},
	})
	if len(res.Errors) > 0 {
		n.t.Fatal(res.Errors)
	}
	pod := res.Pods[0]
	img, err := rt.EnsureImage(n.ctx, runner.PullRequest{Image: e2eImage, Policy: corev1.PullIfNotPresent})
	if err != nil {
		n.t.Fatal(err)
	}
	c := &pod.Spec.Containers[0]
	cfg, err := rt.PreparePod(n.ctx, pod, manifests.Objects{})
	if err != nil {
		n.t.Fatal(err)
	}
	created, err := rt.CreateContainer(n.ctx, runner.CreateRequest{Pod: pod, Config: cfg, Container: c, Hash: manifests.ContainerHash(c), Image: img})
	if err != nil {
		n.t.Fatal(err)
	}
	return created
}

// A staticpod killed after it prepared a container's snapshot and before it wrote the
// container's record leaves the snapshot under a lease that lasts 24 h. When no
// manifest wants the pod any longer, no creation takes the snapshot over: the next
// staticpod deletes the lease, and the snapshot goes with it.
func TestInterruptedCreationOfAPodNoLongerWantedLeavesNoSnapshot(t *testing.T) {
	n := newNode(t)
	n.leaveHalfCreated(podManifest("gone", "Always", "sleep 3600"), "gone.yaml", "snapshot prepared")
	if got := n.activeSnapshots(); len(got) != 1 {
		t.Fatalf("active snapshots before the restart: %v, want the one left", got)
	}
	n.start()
	testenv.Await(t, "the snapshot of the interrupted creation removed", 30*time.Second, func() bool {
		return len(n.activeSnapshots()) == 0
	})
	ls, err := n.d.Client.LeasesService().List(n.ctx)
	if err != nil || len(ls) != 0 {
		t.Errorf("leases after the restart: %v (err %v), want none", ls, err)
	}
}

// activeSnapshots lists the node's active snapshots: a container's root each.
func (n *node) activeSnapshots() []string {
	n.t.Helper()
	var out []string
	err := n.d.Client.SnapshotService("overlayfs").Walk(n.ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive {
			out = append(out, info.Name)
		}
		return nil
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

// A staticpod killed after it removed a pod's last container and before it removed the
// pod's data leaves the pod's directories, with its /dev/shm mounted, and its logs,
// which no container names any longer: the next staticpod removes them when it starts.
// So it does with those of a pod that an earlier staticpod laid out in the root dir.
func TestDataOfAPodRemovedHalfWayIsRemovedAtStart(t *testing.T) {
	n := newNode(t)
	uids := []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"}
	var dirs []string // each pod's directories
	for i, uid := range uids {
		shm := n.path("root/run/pods/" + uid + "/shm")
		if i == 1 { // laid out before the run dir
			shm = n.path("root/pods/" + uid + "/shm")
		}
		dirs = append(dirs, n.path("root/pods/"+uid), n.path("root/run/pods/"+uid), n.path("log/pods/default_gone"+strconv.Itoa(i)+"-node1_"+uid))
		for _, dir := range []string{shm, filepath.Join(dirs[len(dirs)-1], "main"), n.path("root/pods/" + uid)} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := syscall.Mount("shm", shm, "tmpfs", 0, "size=64k"); err != nil {
			t.Fatal(err)
		}
	}
	n.write("kept.yaml", podManifest("kept", "Always", "sleep 3600"))
	n.start()
	n.await("the wanted pod running", time.Minute, running("kept-node1/main/0"))
	testenv.Await(t, "the removed pods' data gone", 10*time.Second, func() bool {
		for _, dir := range dirs {
			if _, err := os.Stat(dir); !os.IsNotExist(err) || len(mountPoints(t, dir)) > 0 {
				return false
			}
		}
		return true
	})
	for _, dir := range []string{"root/pods", "root/run/pods"} {
		if entries, _ := os.ReadDir(n.path(dir)); len(entries) != 1 {
			t.Errorf("pod directories in %s: %d, want the wanted pod's alone", dir, len(entries))
		}
	}
}
