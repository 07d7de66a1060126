package containerdrt

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v2"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/ttrpc"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/emptypb"

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
	r.repairs.lost.period = 100 * time.Millisecond
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	shim := installAsShim(t, self, publicTempDir(t)) // readable and runnable by nobody
	const id = "web_main_0_abcdef12"

	// The user's directory, laid out as <state>/io.containerd.runtime.v2.task/<ns>/.<id>.
	home := publicTempDir(t)
	nsDir := filepath.Join(home, taskBundles, r.cfg.Namespace)
	cwd := filepath.Join(nsDir, "."+id)
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(home, taskBundles), nsDir, cwd} {
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
		r.repairs.lost.mu.Lock()
		if r.repairs.lost.last != last {
			looks, last = looks+1, r.repairs.lost.last
		}
		r.repairs.lost.mu.Unlock()
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
	if shims := findShims("/proc", r.cfg.Address, r.cfg.Namespace); len(shims) != 0 {
		t.Errorf("findShims = %v: processes of a user taken for shims", shims)
	}
}

// A log writer is a child of a shim that root runs in the host's root directory from
// the helper binary (Config.Self), or from the file that was at its path when the
// helper was replaced since (an upgrade). Each container's main process is a child of
// its shim too: one that names itself a log writer of a sibling's log file, newer than
// the sibling's, would otherwise have the sibling's real one ended as stale.
func TestScanShimsTakesOnlyTheHelperForALogWriter(t *testing.T) {
	for _, tc := range []struct {
		name string
		as   func(proc fakeProc, pid int) // how process pid runs
		want bool                         // it is taken for a log writer
	}{
		{name: "the helper, run by root", as: func(fakeProc, int) {}, want: true},
		{name: "the helper, replaced since it started", as: func(p fakeProc, pid int) { p.run(t, pid, 0, p.helper()+" (deleted)") }, want: true},
		{name: "a container's process", as: func(p fakeProc, pid int) { p.inRoot(t, pid, t.TempDir()) }},
		{name: "a user's process", as: func(p fakeProc, pid int) { p.run(t, pid, 65534, p.helper()) }},
		{name: "another binary of root's", as: func(p fakeProc, pid int) { p.run(t, pid, 0, "bin/sleep") }},
		{name: "another binary, gone", as: func(p fakeProc, pid int) { p.run(t, pid, 0, filepath.Join(t.TempDir(), "staticpod-helper (deleted)")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := newFakeProc(t)
			proc.shim(t, 10, "ns", "b_c_0_1")
			proc.logger(t, 20, 10, 500, "path=b")
			proc.add(t, 21, 10, 700, "/app", "logger", "path=b") // newer, for the same log file
			proc.run(t, 21, 0, proc.helper())
			tc.as(proc, 21)
			want := []loggerProc{{PID: 20, Shim: 10, Config: "path=b", Start: 500}}
			if tc.want {
				want = append(want, loggerProc{PID: 21, Shim: 10, Config: "path=b", Start: 700})
			}
			_, loggers := scanShims(string(proc), "/run/c.sock", "ns", proc.helper())
			if diff := cmp.Diff(want, loggers); diff != "" {
				t.Errorf("log writers (-want +got):\n%s", diff)
			}
			l := newLostShims(string(proc))
			l.period = 0
			var stale []loggerProc
			for range 2 {
				_, stale = l.confirm("/run/c.sock", "ns", proc.helper(), map[string]bool{"b_c_0_1": true}, map[string]*task.Process{"b_c_0_1": {}})
			}
			if got := len(stale) > 0; got != tc.want {
				t.Errorf("log writers ended as stale: %v", stale)
			}
		})
	}
}

// Nothing a process names (its -address, the sockets it listens on) is looked up
// before the process is trusted for what it cannot fake (run by root in the host's
// root directory, from a shim's binary): a path of a user's choosing, on an automount
// or a network file system, could hold up every scan.
func TestScanShimsLooksUpNoPathAnUntrustedProcessNames(t *testing.T) {
	proc := newFakeProc(t)
	proc.shim(t, 10, "ns", "a_c_0_1")
	untrusted := func(pid int, binary, path string) {
		proc.add(t, pid, 1, 100, binary, "-namespace", "ns", "-id", "x_c_0_1", "-address", path)
		proc.listens(t, pid, path)
	}
	untrusted(11, "/usr/bin/containerd-shim-runc-v2", "/untrusted/user-shim.sock")
	proc.run(t, 11, 65534, "bin/containerd-shim-runc-v2")
	untrusted(12, "/usr/bin/containerd-shim-runc-v2", "/untrusted/container-shim.sock")
	proc.inRoot(t, 12, t.TempDir())
	untrusted(13, "/usr/bin/containerd-shim-runc-v2", "/untrusted/other-binary.sock")
	proc.run(t, 13, 0, "bin/sleep")
	untrusted(14, "/usr/bin/containerd", "/untrusted/user-containerd.sock")
	proc.run(t, 14, 65534, "/usr/bin/containerd")
	untrusted(15, "/usr/bin/containerd", "/untrusted/container-containerd.sock")
	proc.inRoot(t, 15, t.TempDir())

	var looked []string
	t.Cleanup(func() { statSocket = os.Stat })
	statSocket = func(path string) (os.FileInfo, error) {
		looked = append(looked, path)
		return os.Stat(path)
	}
	if shims := findShims(string(proc), "/run/c.sock", "ns"); len(shims) != 1 || shims[0].PID != 10 {
		t.Errorf("findShims = %v, want shim 10", shims)
	}
	if !slices.Contains(looked, "/run/c.sock") {
		t.Fatalf("looked up %q: not even the trusted shim's socket", looked)
	}
	for _, path := range looked {
		if strings.HasPrefix(path, "/untrusted/") {
			t.Errorf("looked up %s, named by a process not trusted", path)
		}
	}
}

// A PID whose process exits while it is looked at, and that another process takes,
// pairs nothing of the first (its command line: the container ID, the log file) with
// the trust of the second, neither for a shim nor for a log writer.
func TestScanShimsTakesNoPIDReusedWhileRead(t *testing.T) {
	proc := newFakeProc(t)
	proc.shim(t, 10, "ns", "fake_c_0_1") // a fake's, then a real shim's once read
	proc.shim(t, 11, "ns", "b_c_0_1")
	proc.logger(t, 20, 11, 500, "path=fake")
	reused := []<-chan struct{}{
		proc.reusedWhileRead(t, 10, 1, 900, "/usr/bin/containerd-shim-runc-v2", "-namespace", "ns", "-id", "real_c_0_1", "-address", "/run/c.sock"),
		proc.reusedWhileRead(t, 20, 11, 900, "/var/lib/staticpod/bin/staticpod-helper", "logger", "path=real"),
	}
	shims, loggers := scanShims(string(proc), "/run/c.sock", "ns", proc.helper())
	for i, read := range reused {
		select {
		case <-read:
		default:
			t.Fatalf("the command line of reused PID %d was never read", i)
		}
	}
	if !slices.Contains(shims, shimProc{11, 100, "b_c_0_1"}) || slices.ContainsFunc(shims, func(s shimProc) bool { return s.ID == "fake_c_0_1" }) {
		t.Errorf("shims %v, want b_c_0_1's and none for fake_c_0_1", shims)
	}
	if slices.ContainsFunc(loggers, func(l loggerProc) bool { return l.Config == "path=fake" }) {
		t.Errorf("log writers %v, want none for path=fake", loggers)
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
	_, start, ok := parentAndStart(proc.Root, pid)
	if !ok {
		t.Fatal("no start time")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, _, err := dialShim(ctx, "/proc", shimProc{PID: pid, Start: start - 1, ID: "a_c_0_1"}); !errors.Is(err, errOtherProcess) {
		if c != nil {
			c.Close()
		}
		t.Errorf("dialShim of a shim whose PID is another process's now: %v, want %v", err, errOtherProcess)
	}
	c, _, err := dialShim(ctx, "/proc", shimProc{PID: pid, Start: start, ID: "a_c_0_1"})
	if err != nil {
		t.Fatalf("dialShim of the shim looked at: %v", err)
	}
	c.Close()
}

// A lost shim whose container runc never made is ended only when all that runs under
// it is its own log writers: a container's process there, or a "logger" that is not
// staticpod's helper run by root in the host's root, keeps it alive.
func TestLogWritersOnly(t *testing.T) {
	children := func(p fakeProc, pid int, kids ...int) {
		dir := filepath.Join(string(p), strconv.Itoa(pid), "task", strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var list []string
		for _, k := range kids {
			list = append(list, strconv.Itoa(k))
		}
		if err := os.WriteFile(filepath.Join(dir, "children"), []byte(strings.Join(list, " ")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		set  func(p fakeProc)
		want []int // the log writers; nil with ok false
		ok   bool
	}{
		{"nothing under it", func(p fakeProc) { children(p, 10) }, nil, true},
		{"its log writer", func(p fakeProc) { p.logger(t, 20, 10, 500, "path=b"); children(p, 10, 20) }, []int{20}, true},
		{"a container's process beside it", func(p fakeProc) {
			p.logger(t, 20, 10, 500, "path=b")
			p.add(t, 22, 10, 600, "sh", "-c", "sleep 1")
			p.inRoot(t, 22, t.TempDir())
			children(p, 10, 20, 22)
		}, nil, false},
		{"a logger of a user's", func(p fakeProc) {
			p.logger(t, 20, 10, 500, "path=b")
			p.run(t, 20, 65534, p.helper())
			children(p, 10, 20)
		}, nil, false},
		{"children that cannot be read", func(p fakeProc) {}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProc(t)
			p.shim(t, 10, "ns", "b_c_0_1")
			tc.set(p)
			writers, ok := logWritersOnly(string(p), 10, p.helper())
			var got []int
			for _, w := range writers {
				got = append(got, w.PID)
			}
			if ok != tc.ok || !slices.Equal(got, tc.want) {
				t.Errorf("logWritersOnly = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
