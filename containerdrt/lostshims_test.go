package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/internal/proc"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// The two ways containerd loses track of a container its shim still serves, each
// made for real: its record removed while its task runs (a creation that finished
// after the next staticpod removed a container it took for never started), and its
// task forgotten by containerd (a creation containerd cleaned up after its client
// died, while the shim finished it). Repair ends both in their shims, which exit, and
// leaves a healthy container alone. The runtime reaches containerd through a symlink
// to its socket file (as k3s links /run/containerd/containerd.sock to its own), while
// containerd starts its shims with the socket's own path.
func TestLostShimsAreEnded(t *testing.T) {
	d := testenv.Start(t) // restarted below
	linked := filepath.Join(t.TempDir(), "containerd.sock")
	if err := os.Symlink(d.Address, linked); err != nil {
		t.Fatal(err)
	}
	r := newTestRuntimeOn(t, d, func(cfg *Config) { cfg.Address = linked })
	t.Cleanup(func() { shims.Kill("/proc", r.cfg.Address, r.cfg.Namespace) }) // after a failure
	r.repairs.lost.Period = 100 * time.Millisecond
	run := func(name string) runner.Container {
		pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+name+"}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
		c := r.mustRunPod(t, pod)["c"]
		return r.awaitState(t, c.ID, runner.StateRunning)
	}
	healthy, unrecorded, forgotten := run("healthy"), run("unrecorded"), run("forgotten")
	shimPID := map[string]int{}
	for _, s := range shims.Find("/proc", r.cfg.Address, r.cfg.Namespace) {
		shimPID[s.ID] = s.PID
	}
	for _, c := range []runner.Container{healthy, unrecorded, forgotten} {
		if shimPID[c.ID] == 0 {
			t.Fatalf("no shim for %s among %v", c.ID, shimPID)
		}
		t.Cleanup(func() { syscall.Kill(int(c.PID), syscall.SIGKILL) }) // if all else failed
	}

	// containerd restarted without the task's bundle: it no longer knows the shim.
	if err := d.Halt(); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(d.State(), "io.containerd.runtime.v2.task", r.cfg.Namespace, forgotten.ID)
	syscall.Unmount(filepath.Join(bundle, "rootfs"), syscall.MNT_DETACH)
	if err := os.RemoveAll(bundle); err != nil {
		t.Fatal(err)
	}
	if err := d.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	testenv.Await(t, "List to reconnect", 30*time.Second, func() bool {
		_, err := r.relist(r.ctx)
		return err == nil
	})
	if err := d.Client.ContainerService().Delete(r.ctx, unrecorded.ID); err != nil {
		t.Fatal(err)
	}
	resp, err := d.Client.TaskService().List(namespaces.WithNamespace(r.ctx, r.cfg.Namespace), &tasks.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, p := range resp.Tasks {
		listed[p.ID] = true
	}
	if listed[forgotten.ID] || !listed[unrecorded.ID] {
		t.Fatalf("containerd lists tasks %v: want %s's, not %s's", listed, unrecorded.ID, forgotten.ID)
	}

	for _, c := range []runner.Container{unrecorded, forgotten} {
		testenv.Await(t, "the shim and the process of "+c.ID+" gone", 30*time.Second, func() bool {
			if _, err := r.relist(r.ctx); err != nil {
				t.Fatal(err)
			}
			return !shims.Alive(shimPID[c.ID]) && !shims.Alive(int(c.PID))
		})
	}
	if _, err := r.relist(r.ctx); err != nil {
		t.Fatal(err)
	}
	if !shims.Alive(shimPID[healthy.ID]) || !shims.Alive(int(healthy.PID)) {
		t.Fatalf("the healthy container's shim %d or process %d is gone", shimPID[healthy.ID], healthy.PID)
	}
	if got, _ := r.find(t, healthy.ID); got.State != runner.StateRunning {
		t.Fatalf("the healthy container is %s, want running", got.State)
	}
}

// silentShimEnv names the socket a silent shim (runSilentShim) listens on; the test
// binary runs as one when it is set.
const silentShimEnv = "STATICPOD_TEST_SILENT_SHIM"

// runSilentShim listens on socket and never answers, as a shim stuck before it serves
// (containerd 2.x leaves one blocked opening its log pipe); with STATICPOD_TEST_CHILD
// set it runs a child process too.
func runSilentShim(socket string) {
	ln, err := net.Listen("unix", socket)
	if err != nil {
		os.Exit(1)
	}
	defer ln.Close() // held: a listener no longer referenced is closed by the collector
	if os.Getenv("STATICPOD_TEST_CHILD") != "" {
		exec.Command("sleep", "3600").Start()
	}
	select {}
}

// installAsShim puts program into dir as containerd-shim-runc-v2 (a hard link, else a
// copy), readable and runnable by anyone, puts dir first on PATH, where shims are
// looked up, and returns the shim's path.
func installAsShim(t *testing.T, program, dir string) string {
	t.Helper()
	shim := filepath.Join(dir, "containerd-shim-runc-v2")
	if err := os.Link(program, shim); err != nil {
		data, err := os.ReadFile(program)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(shim, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(filepath.ListSeparator)+os.Getenv("PATH"))
	return shim
}

// A shim containerd lost track of that does not answer at all is killed when nothing
// runs under it, and left alone (and reported) when something does.
func TestSilentLostShims(t *testing.T) {
	r := newTestRuntime(t)
	r.repairs.lost.Period = 100 * time.Millisecond
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shimPath := installAsShim(t, self, dir) // a shim by its binary's name, run by root from PATH
	start := func(id string, child bool) *exec.Cmd {
		cmd := exec.Command(shimPath, "-namespace", r.cfg.Namespace, "-id", id, "-address", r.cfg.Address)
		cmd.Env = append(os.Environ(), silentShimEnv+"="+filepath.Join(dir, id+".sock"))
		if child {
			cmd.Env = append(cmd.Env, "STATICPOD_TEST_CHILD=1")
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if child {
				if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid)); err == nil {
					for _, pid := range strings.Fields(string(data)) {
						if n, err := strconv.Atoi(pid); err == nil {
							syscall.Kill(n, syscall.SIGKILL)
						}
					}
				}
			}
			cmd.Process.Kill()
			cmd.Wait()
		})
		return cmd
	}
	idle, busy := start("idle_c_0_1", false), start("busy_c_0_1", true)
	exited := make(chan struct{})
	go func() { idle.Wait(); close(exited) }()
	testenv.Await(t, "a child under the busy shim, and both listening", 10*time.Second, func() bool {
		_, err1 := proc.ListeningUnixSockets(proc.Root, idle.Process.Pid)
		_, err2 := proc.ListeningUnixSockets(proc.Root, busy.Process.Pid)
		return err1 == nil && err2 == nil && shims.HasChildren(proc.Root, busy.Process.Pid)
	})
	testenv.Await(t, "the idle silent shim killed", 30*time.Second, func() bool {
		if _, err := r.relist(r.ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
			return true
		default:
			return false
		}
	})
	testenv.Await(t, "the ending that killed it to finish, the busy shim's turn included", 30*time.Second, func() bool {
		return !r.repairs.lost.busy.Load()
	})
	if err := busy.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the silent shim with a child was killed: %v", err)
	}
}

// A staticpod killed while containerd made a task can leave a shim that serves the
// container, while runc never made it: runc keeps no state of it, so its bundle cannot
// be found (it is never taken from the shim's working directory), and the shim runs
// nothing. Such a shim is killed; one with a child is left.
func TestLostShimWithoutRuncStateIsKilled(t *testing.T) {
	r := newTestRuntime(t)
	r.repairs.lost.Period = 100 * time.Millisecond
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shimPath := installAsShim(t, self, dir)
	cmd := exec.Command(shimPath, "-namespace", r.cfg.Namespace, "-id", "cut_c_0_1", "-address", r.cfg.Address)
	cmd.Env = append(os.Environ(), fakeShimEnv+"="+filepath.Join(dir, "cut.sock")) // answers as a shim serving it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	testenv.Await(t, "the fake shim listening", 10*time.Second, func() bool {
		_, err := proc.ListeningUnixSockets(proc.Root, cmd.Process.Pid)
		return err == nil
	})
	if _, err := os.Stat(filepath.Join(shims.RuncRoot, r.cfg.Namespace, "cut_c_0_1")); !os.IsNotExist(err) {
		t.Fatalf("runc state of the fake shim's container: %v, want none", err)
	}
	testenv.Await(t, "the shim serving a container runc never made killed", 30*time.Second, func() bool {
		if _, err := r.relist(r.ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
			return true
		default:
			return false
		}
	})
}

// A task bundle containerd left behind (its deletion failed) made every later start of
// the same container ID fail with "mkdir <bundle>: file exists" until containerd
// restarted. One with no shim is removed once it is old enough (see
// shims.RemoveStaleBundle: a creation under way makes its shim within milliseconds of
// its bundle), with the renamed copy a failed deletion leaves, and the start goes on.
func TestStaleBundleIsRemoved(t *testing.T) {
	r := newTestRuntime(t)
	d := ctd.Daemon(t)
	created := r.mustCreateUnstarted(t, "bundle")
	dir := filepath.Join(d.State(), "io.containerd.runtime.v2.task", r.cfg.Namespace)
	bundle, renamed := filepath.Join(dir, created.ID), filepath.Join(dir, "."+created.ID)
	for _, p := range []string{bundle, renamed} {
		if err := os.MkdirAll(filepath.Join(p, "rootfs"), 0o711); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(renamed) })

	if err := r.StartContainer(r.ctx, created.ID); err != nil {
		t.Fatalf("StartContainer over a bundle left behind: %v", err)
	}
	if st, err := os.Stat(bundle); err != nil || time.Since(st.ModTime()) > time.Minute {
		t.Fatalf("the bundle of the started task: %v, want a new one", err)
	}
	r.awaitState(t, created.ID, runner.StateRunning)
	if _, err := os.Stat(renamed); !os.IsNotExist(err) {
		t.Errorf("the renamed copy of a bundle left behind: %v, want it gone", err)
	}
	if path, ok := shims.StaleBundle(errors.New("failed to create shim task: mkdir "+bundle+": file exists"), r.cfg.Namespace, "other"); ok {
		t.Errorf("staleBundle took %s for another container's", path)
	}
}

// A staticpod killed while containerd created a task can leave a shim started for that
// container which containerd lists no task for, holding the task's bundle: the next
// staticpod's start of the container failed with "mkdir <bundle>: file exists" until
// the repairs ended the shim at their second look, and the back-off on top kept the
// pod down for half a minute. The start ends such a shim at once, waits for the
// bundle, and goes on.
func TestLostShimInTheWayOfATaskIsEndedAtOnce(t *testing.T) {
	r := newTestRuntime(t)
	r.repairs.lost.Period = time.Hour // the repairs' looks are not what ends it
	d := ctd.Daemon(t)
	created := r.mustCreateUnstarted(t, "inway")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shim := exec.Command(installAsShim(t, self, dir), "-namespace", r.cfg.Namespace, "-id", created.ID, "-address", r.cfg.Address)
	shim.Env = append(os.Environ(), silentShimEnv+"="+filepath.Join(dir, "shim.sock"))
	if err := shim.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { shim.Wait(); close(exited) }()
	t.Cleanup(func() { shim.Process.Kill(); <-exited })
	testenv.Await(t, "the shim listening", 10*time.Second, func() bool {
		_, err := proc.ListeningUnixSockets(proc.Root, shim.Process.Pid)
		return err == nil
	})
	bundle := filepath.Join(d.State(), "io.containerd.runtime.v2.task", r.cfg.Namespace, created.ID)
	if err := os.MkdirAll(filepath.Join(bundle, "rootfs"), 0o711); err != nil {
		t.Fatal(err)
	}

	if err := r.StartContainer(r.ctx, created.ID); err != nil {
		t.Fatalf("StartContainer over the bundle of a lost shim: %v", err)
	}
	select {
	case <-exited:
	default:
		t.Fatal("the lost shim in the way still runs")
	}
	r.awaitState(t, created.ID, runner.StateRunning)
}
