package testenv_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/staticpod/staticpod/internal/testenv"
)

var ctd testenv.Shared

func TestMain(m *testing.M) { os.Exit(ctd.Main(m)) }

const testRef = "docker.io/library/busybox:testenv"

func TestContainerRunsImportedImage(t *testing.T) {
	d := ctd.Daemon(t)
	ns := d.Namespace(t)
	ctx := d.Context(t, ns)
	start := time.Now()
	image := d.MustImportImage(t, ns, testenv.ImageOptions{
		Ref:   testRef,
		Files: map[string]testenv.File{"etc/extra.txt": {Content: []byte("extra-file-content\n")}},
	})
	t.Logf("imported and unpacked %s in %v", image.Name(), time.Since(start).Round(time.Millisecond))

	out, code := mustRunToExit(t, ctx, d, image, "hello",
		oci.WithHostname("testenv"),
		oci.WithProcessArgs("sh", "-c", "echo hello-from-$(hostname); cat /etc/extra.txt"))
	if code != 0 {
		t.Errorf("exit code = %d, want 0; output:\n%s", code, out)
	}
	for _, want := range []string{"hello-from-testenv\n", "extra-file-content\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output = %q, want it to contain %q", out, want)
		}
	}
}

func TestContainerUsesImageConfig(t *testing.T) {
	d := ctd.Daemon(t)
	ns := d.Namespace(t)
	ctx := d.Context(t, ns)
	image := d.MustImportImage(t, ns, testenv.ImageOptions{
		Ref:        testRef,
		Entrypoint: []string{"sh", "-c"},
		Cmd:        []string{`echo "$GREETING $(pwd) $(id -u):$(id -g)"; ls /bin/wget`},
		Env:        []string{"GREETING=hi"},
		WorkingDir: "/tmp",
		User:       "nobody",
	})
	out, code := mustRunToExit(t, ctx, d, image, "config")
	if want := "hi /tmp 65534:65534\n/bin/wget\n"; code != 0 || out != want {
		t.Errorf("exit code, output = %d, %q; want 0, %q", code, out, want)
	}
}

func TestContainerExitCodeReported(t *testing.T) {
	d := ctd.Daemon(t)
	ns := d.Namespace(t)
	ctx := d.Context(t, ns)
	image := d.MustImportImage(t, ns, testenv.ImageOptions{Ref: testRef})
	out, code := mustRunToExit(t, ctx, d, image, "fails", oci.WithProcessArgs("sh", "-c", "echo failing >&2; exit 7"))
	if code != 7 || out != "failing\n" {
		t.Errorf("exit code, output = %d, %q; want 7, %q", code, out, "failing\n")
	}
}

// mustRunToExit runs a container from image to its exit and deletes it, returning its
// combined output and exit code.
func mustRunToExit(t *testing.T, ctx context.Context, d *testenv.Daemon, image client.Image, id string, opts ...oci.SpecOpts) (string, uint32) {
	t.Helper()
	var out testenv.Buffer
	task := mustStartTask(t, ctx, d, image, id, &out, opts...)
	status, err := testenv.RunTask(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if err := status.Error(); err != nil {
		t.Fatalf("exit status of %s: %v", id, err)
	}
	return out.String(), status.ExitCode()
}

// mustStartTask creates a container from image and its task, not yet started, with stdout
// and stderr going to out. The container is deleted when t ends.
func mustStartTask(t *testing.T, ctx context.Context, d *testenv.Daemon, image client.Image, id string, out *testenv.Buffer, opts ...oci.SpecOpts) client.Task {
	t.Helper()
	return mustCreateTask(t, ctx, d, image, id, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(d.FIFODir())), opts...)
}

// mustCreateTask is mustStartTask with the task's I/O made by creator.
func mustCreateTask(t *testing.T, ctx context.Context, d *testenv.Daemon, image client.Image, id string, creator cio.Creator, opts ...oci.SpecOpts) client.Task {
	t.Helper()
	c, err := d.Client.NewContainer(ctx, id,
		client.WithNewSnapshot(id+"-rootfs", image),
		client.WithNewSpec(append([]oci.SpecOpts{oci.WithImageConfig(image)}, opts...)...))
	if err != nil {
		t.Fatalf("create container %s: %v", id, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		c.Delete(ctx, client.WithSnapshotCleanup) // gone already if the test purged or stopped
	})
	task, err := c.NewTask(ctx, creator)
	if err != nil {
		t.Fatalf("create task %s: %v", id, err)
	}
	return task
}

// TestStopLeavesNothing runs containers on a daemon of its own and checks that purging a
// namespace and stopping the daemon leave no container, process, mount, cgroup or file.
func TestStopLeavesNothing(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("daemon-crashed=%v", crash), func(t *testing.T) {
			testStopLeavesNothing(t, crash)
		})
	}
}

func testStopLeavesNothing(t *testing.T, crash bool) {
	d := testenv.Start(t)
	ns := d.Namespace(t)
	ctx := d.Context(t, ns)
	image := d.MustImportImage(t, ns, testenv.ImageOptions{Ref: testRef, Cmd: []string{"sleep", "600"}})

	purged := mustStartTask(t, ctx, d, image, "purged", &testenv.Buffer{})
	if err := purged.Start(ctx); err != nil {
		t.Fatalf("start task: %v", err)
	}
	if err := d.PurgeNamespace(ctx, ns); err != nil {
		t.Fatalf("PurgeNamespace: %v", err)
	}
	if cs, err := d.Client.Containers(ctx); err != nil || len(cs) != 0 {
		t.Errorf("containers after PurgeNamespace = %d (err %v), want none", len(cs), err)
	}
	assertGone(t, purged.Pid())

	left := mustStartTask(t, ctx, d, image, "left", &testenv.Buffer{})
	if err := left.Start(ctx); err != nil {
		t.Fatalf("start task: %v", err)
	}
	shims, err := testenv.ShimPIDs(d.Address)
	if err != nil || len(shims) == 0 {
		t.Fatalf("ShimPIDs = %v, %v; want a shim", shims, err)
	}
	if len(mountsUnder(t, d.Dir())) == 0 {
		t.Errorf("no mounts under %s while a task runs", d.Dir())
	}
	hostPaths := []string{
		shimSocket(d.Address, ns, "left"),
		"/run/containerd/runc/" + ns + "/left",
		"/sys/fs/cgroup/memory/" + ns + "/left",
	}
	for _, p := range hostPaths {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("stat %s while a task runs: %v", p, err)
		}
	}
	if crash {
		syscall.Kill(d.PID(), syscall.SIGKILL) // the shim and its task outlive the daemon
		select {
		case <-d.Exited():
		case <-ctx.Done():
			t.Fatalf("await containerd exit after SIGKILL: %v", ctx.Err())
		}
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertNothingLeft(t, d, ns, hostPaths, append(shims, int(left.Pid()))...)
}

// shimSocket is where containerd 1.6 and 2.x put the socket of a shim.
func shimSocket(address, ns, id string) string {
	return fmt.Sprintf("/run/containerd/s/%x", sha256.Sum256([]byte(filepath.Join(address, ns, id))))
}

func assertNothingLeft(t *testing.T, d *testenv.Daemon, ns string, paths []string, pids ...int) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("stat %s after Stop: %v, want not exist", p, err)
		}
	}
	for _, pid := range pids {
		assertGone(t, uint32(pid))
	}
	if shims, err := testenv.ShimPIDs(d.Address); err != nil || len(shims) != 0 {
		t.Errorf("ShimPIDs after Stop = %v, %v; want none", shims, err)
	}
	if m := mountsUnder(t, d.Dir()); len(m) != 0 {
		t.Errorf("mounts after Stop: %v", m)
	}
	if _, err := os.Stat(d.Dir()); !os.IsNotExist(err) {
		t.Errorf("stat %s after Stop: %v, want not exist", d.Dir(), err)
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/" + ns); len(left) != 0 {
		t.Errorf("cgroups after Stop: %v", left)
	}
	if _, err := os.Stat("/run/containerd/runc/" + ns); !os.IsNotExist(err) {
		t.Errorf("runc state of %s after Stop: %v, want not exist", ns, err)
	}
}

// assertGone fails unless pid has exited (a zombie counts: only its parent can reap it).
func assertGone(t *testing.T, pid uint32) {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil && !strings.Contains(string(stat), ") Z ") {
		t.Errorf("process %d still running: %s", pid, stat)
	}
}

func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var points []string
	for line := range strings.Lines(string(data)) {
		if fields := strings.Fields(line); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	return points
}

// A daemon halted and resumed is the same daemon: its task ran on in its shim meanwhile
// and is found again, the same process, by the new client.
func TestHaltAndResumeKeepTasks(t *testing.T) {
	d := testenv.Start(t)
	ns := d.Namespace(t)
	ctx := d.Context(t, ns)
	image := d.MustImportImage(t, ns, testenv.ImageOptions{Ref: testRef, Cmd: []string{"sleep", "600"}})
	task := mustStartTask(t, ctx, d, image, "survivor", &testenv.Buffer{})
	if err := task.Start(ctx); err != nil {
		t.Fatalf("start task: %v", err)
	}
	if err := d.Halt(); err != nil {
		t.Fatalf("Halt: %v", err)
	}
	select {
	case <-d.Exited():
	default:
		t.Fatal("the daemon runs on after Halt")
	}
	if err := syscall.Kill(int(task.Pid()), 0); err != nil {
		t.Fatalf("the task's process %d is gone with the daemon: %v", task.Pid(), err)
	}
	if err := d.Resume(ctx); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	c, err := d.Client.LoadContainer(ctx, "survivor")
	if err != nil {
		t.Fatalf("load the container after Resume: %v", err)
	}
	again, err := c.Task(ctx, nil)
	if err != nil {
		t.Fatalf("load the task after Resume: %v", err)
	}
	if st, err := again.Status(ctx); err != nil || st.Status != client.Running || again.Pid() != task.Pid() {
		t.Errorf("after Resume: task %d %v (err %v), want %d running", again.Pid(), st.Status, err, task.Pid())
	}
}
