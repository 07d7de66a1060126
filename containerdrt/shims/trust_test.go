package shims

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/containerd/api/types/task"
	"github.com/google/go-cmp/cmp"
)

// A log writer is a child of a shim that root runs in the host's root directory from
// the helper binary (containerdrt's Config.Self), or from the file that was at its
// path when the helper was replaced since (an upgrade). Each container's main process is a child of
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
			want := []LogWriter{{PID: 20, Shim: 10, Config: "path=b", Start: 500}}
			if tc.want {
				want = append(want, LogWriter{PID: 21, Shim: 10, Config: "path=b", Start: 700})
			}
			_, loggers := scan(string(proc), "/run/c.sock", "ns", proc.helper())
			if diff := cmp.Diff(want, loggers); diff != "" {
				t.Errorf("log writers (-want +got):\n%s", diff)
			}
			l := NewLost(string(proc))
			l.Period = 0
			var stale []LogWriter
			for range 2 {
				_, stale = l.Confirm("/run/c.sock", "ns", proc.helper(), map[string]bool{"b_c_0_1": true}, map[string]*task.Process{"b_c_0_1": {}})
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
	if shims := Find(string(proc), "/run/c.sock", "ns"); len(shims) != 1 || shims[0].PID != 10 {
		t.Errorf("Find = %v, want shim 10", shims)
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
	shims, loggers := scan(string(proc), "/run/c.sock", "ns", proc.helper())
	for i, read := range reused {
		select {
		case <-read:
		default:
			t.Fatalf("the command line of reused PID %d was never read", i)
		}
	}
	if !slices.Contains(shims, Proc{11, 100, "b_c_0_1"}) || slices.ContainsFunc(shims, func(s Proc) bool { return s.ID == "fake_c_0_1" }) {
		t.Errorf("shims %v, want b_c_0_1's and none for fake_c_0_1", shims)
	}
	if slices.ContainsFunc(loggers, func(l LogWriter) bool { return l.Config == "path=fake" }) {
		t.Errorf("log writers %v, want none for path=fake", loggers)
	}
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
			writers, ok := LogWritersOnly(string(p), 10, p.helper())
			var got []int
			for _, w := range writers {
				got = append(got, w.PID)
			}
			if ok != tc.ok || !slices.Equal(got, tc.want) {
				t.Errorf("LogWritersOnly = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
