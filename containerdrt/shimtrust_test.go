package containerdrt

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v2"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/internal/proc"
	"github.com/staticpod/staticpod/internal/testenv"
)

// fakeShimEnv names the socket a fake shim (runFakeShim) serves the task API on;
// fakeShimSwapEnv its swap: "<dir>:<target>".
const (
	fakeShimEnv     = "STATICPOD_TEST_FAKE_SHIM"
	fakeShimSwapEnv = "STATICPOD_TEST_FAKE_SHIM_SWAP"
)

// runFakeShim serves the task API on socket as a shim would, answering every call.
// When it is told to kill, it first replaces directory swap's dir by a symlink to its
// target: a bundle made in dir, removed after the kill, would be removed in target.
func runFakeShim(socket, swap string) {
	ln, err := net.Listen("unix", socket)
	if err != nil {
		os.Exit(1)
	}
	answer := func(resp any) ttrpc.Method {
		return func(ctx context.Context, unmarshal func(any) error) (any, error) { return resp, nil }
	}
	kill := func(ctx context.Context, unmarshal func(any) error) (any, error) {
		if dir, target, ok := strings.Cut(swap, ":"); ok {
			os.Rename(dir, dir+".moved")
			os.Symlink(target, dir)
		}
		return &emptypb.Empty{}, nil
	}
	s, err := ttrpc.NewServer()
	if err != nil {
		os.Exit(1)
	}
	for _, service := range shimServices {
		s.RegisterService(service, &ttrpc.ServiceDesc{Methods: map[string]ttrpc.Method{
			"Connect":  answer(&taskapi.ConnectResponse{}),
			"Kill":     kill,
			"Wait":     answer(&taskapi.WaitResponse{}),
			"Delete":   answer(&taskapi.DeleteResponse{}),
			"Shutdown": answer(&emptypb.Empty{}),
		}})
	}
	s.Serve(context.Background(), ln)
	os.Exit(0)
}

// publicTempDir is a temporary directory that every user may enter (t.TempDir's
// parent is root's alone), removed when the test ends.
func publicTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "staticpod-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// asNobody makes cmd run as the unprivileged user nobody.
func asNobody(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}

// A user who starts processes with a shim's command line for staticpod's namespace and
// containerd (one that answers the task API, one that answers nothing), in a
// directory laid out as a task bundle's that they swap for a symlink to another
// directory when told to kill, gets nothing done as root: the repairs look at them again and
// again and neither kills them, nor makes or removes a directory where they run, nor
// reaches the directory their symlink points to.
func TestFakeShimsOfAUserAreLeftAlone(t *testing.T) {
	r := newTestRuntime(t)
	r.repairs.lost.Period = 100 * time.Millisecond
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	shim := installAsShim(t, self, publicTempDir(t)) // readable and runnable by nobody
	const id = "web_main_0_abcdef12"

	// The user's directory, laid out as <state>/io.containerd.runtime.v2.task/<ns>/.<id>.
	home := publicTempDir(t)
	nsDir := filepath.Join(home, "io.containerd.runtime.v2.task", r.cfg.Namespace)
	cwd := filepath.Join(nsDir, "."+id)
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(home, "io.containerd.runtime.v2.task"), nsDir, cwd} {
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	// root's directory the swap points to: <victims>/<id>, holding a marker.
	victims := publicTempDir(t)
	marker := filepath.Join(victims, id, "marker")
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}

	start := func(env ...string) *exec.Cmd {
		cmd := exec.Command(shim, "-namespace", r.cfg.Namespace, "-id", id, "-address", r.cfg.Address)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), env...)
		asNobody(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	sockets := publicTempDir(t) // short: the bundle's path is too long for a socket's
	if err := os.Chown(sockets, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	answering := start(fakeShimEnv+"="+filepath.Join(sockets, "task.sock"), fakeShimSwapEnv+"="+nsDir+":"+victims)
	silent := start(silentShimEnv + "=" + filepath.Join(sockets, "silent.sock"))
	exited := make(chan string, 2)
	go func() { answering.Wait(); exited <- "the answering fake" }()
	go func() { silent.Wait(); exited <- "the silent fake" }()
	testenv.Await(t, "both fakes listening", 10*time.Second, func() bool {
		_, err1 := proc.ListeningUnixSockets(proc.Root, answering.Process.Pid)
		_, err2 := proc.ListeningUnixSockets(proc.Root, silent.Process.Pid)
		return err1 == nil && err2 == nil
	})

	// A shim is ended at the second look that finds it lost: three looks, and the
	// ending they started over, see everything there is to see.
	looks, last := 0, time.Time{}
	testenv.Await(t, "three looks for lost shims, and no ending under way", 30*time.Second, func() bool {
		if _, err := r.relist(r.ctx); err != nil {
			t.Fatal(err)
		}
		if look := r.repairs.lost.LastLook(); look != last {
			looks, last = looks+1, look
		}
		return looks >= 3 && !r.repairs.lost.busy.Load()
	})
	select {
	case who := <-exited:
		t.Errorf("%s was killed", who)
	default:
	}
	if data, err := os.ReadFile(marker); err != nil || string(data) != "keep" {
		t.Errorf("the marker in the directory the swap points to: %q, %v; want it kept", data, err)
	}
	if _, err := os.Lstat(nsDir + ".moved"); err == nil {
		t.Errorf("the fake was told to kill: it was dialed as a shim")
	}
	for _, p := range []string{filepath.Join(nsDir, id), filepath.Join(nsDir+".moved", id)} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was made in the user's directory", p)
		}
	}
	if found := shims.Find("/proc", r.cfg.Address, r.cfg.Namespace); len(found) != 0 {
		t.Errorf("shims.Find = %v: processes of a user taken for shims", found)
	}
}

// The shim is dialed only while its PID is still the process looked at: the sockets
// of a process that took the PID since are not the shim's.
func TestDialShimRefusesAPIDReusedSinceTheLook(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(t.TempDir(), "task.sock")
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fakeShimEnv+"="+socket)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	testenv.Await(t, "the fake shim listening", 10*time.Second, func() bool {
		_, err := proc.ListeningUnixSockets(proc.Root, pid)
		return err == nil
	})
	st, err := proc.ReadStat(proc.Root, pid)
	if err != nil {
		t.Fatalf("no start time: %v", err)
	}
	start := st.StartTime
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, _, err := dialShim(ctx, "/proc", shims.Proc{PID: pid, Start: start - 1, ID: "a_c_0_1"}); !errors.Is(err, shims.ErrOtherProcess) {
		if c != nil {
			c.Close()
		}
		t.Errorf("dialShim of a shim whose PID is another process's now: %v, want %v", err, shims.ErrOtherProcess)
	}
	c, _, err := dialShim(ctx, "/proc", shims.Proc{PID: pid, Start: start, ID: "a_c_0_1"})
	if err != nil {
		t.Fatalf("dialShim of the shim looked at: %v", err)
	}
	c.Close()
}
