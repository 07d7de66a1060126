package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// BenchmarkFootprint measures the memory a node of 20 idle pods costs beyond their
// apps: the daemon, the shims, the pods' pause (sandbox) processes and the log writers,
// as PSS from /proc/<pid>/smaps_rollup, so that pages shared by several processes are
// counted once in all. Each pod has one container and a network namespace of its own.
// containerd itself and the apps are left out. Next to it, in the same run, the floor
// that any design on containerd pays: the daemon plus the shims of 20 containers started
// straight through the client (MiB-floor, and the total as x-floor).
//
// The processes are told apart by what they are, not by how many there should be: a
// shim is a containerd-shim of this test's containerd and namespace; pause processes
// and log writers are the shims' children whose first argument is "pause" or "logger",
// whatever binary runs them. The timed loop is one look at /proc, so ns/op is left out.
func BenchmarkFootprint(b *testing.B) {
	const pods = 20
	n := newNode(b)
	n.startRaw("floor", pods, false)
	floorShims := n.footprint(0).shims
	n.remove("floor", pods)
	n.awaitNoShims()

	sp := n.start()
	for i := range pods {
		name := fmt.Sprintf("idle%d", i)
		n.write(name+".yaml", podManifest(name, "Always", "sleep 3600"))
	}
	n.awaitCount(pods, runner.StateRunning)
	n.awaitRelists(10) // a couple of seconds with every pod running: the daemon settles
	var f footprint
	for b.Loop() {
		f = n.footprint(sp.cmd.Process.Pid)
	}
	if f.shims.procs == 0 || f.loggers.procs == 0 || floorShims.procs == 0 {
		b.Fatalf("found %d shims and %d log writers for %d pods, and %d shims for the floor's %d containers",
			f.shims.procs, f.loggers.procs, pods, floorShims.procs, pods)
	}
	floor := f.daemon.kib + floorShims.kib
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mib(f.daemon.kib), "MiB-daemon")
	b.ReportMetric(mib(f.shims.kib), "MiB-shims")
	b.ReportMetric(mib(f.pause.kib), "MiB-pause")
	b.ReportMetric(mib(f.loggers.kib), "MiB-loggers")
	b.ReportMetric(mib(f.total()), "MiB-total")
	b.ReportMetric(mib(floor), "MiB-floor")
	b.ReportMetric(float64(f.total())/float64(floor), "x-floor")
	b.ReportMetric(float64(f.shims.procs), "shims")
	b.ReportMetric(float64(f.pause.procs), "pause")
	b.ReportMetric(float64(f.loggers.procs), "loggers")
}

// Killing the container of a pod that has a network of its own restarts it in the
// shim the pod already has: no shim starts and none exits.
func TestContainerRestartKeepsThePodsShim(t *testing.T) {
	n := newNode(t)
	n.start()
	n.write("web.yaml", podManifest("web", "Always", "sleep 3600"))
	first := n.await("the pod running", time.Minute, running("web-node1/main/0"))["web-node1/main/0"]
	before := n.shimPIDs()
	if len(before) == 0 {
		t.Fatalf("no shim of namespace %s found in /proc", n.ns)
	}
	if err := syscall.Kill(int(first.PID), syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", first.ID, err)
	}
	n.await("the container restarted", time.Minute, running("web-node1/main/1"))
	if after := n.shimPIDs(); !maps.Equal(after, before) {
		t.Errorf("shims %v before the restart, %v after; want the same", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
}

// usage is what the processes of one kind cost.
type usage struct {
	procs int
	kib   int64 // PSS, summed
}

// footprint is what staticpod's processes on a node cost, by kind.
type footprint struct {
	daemon, shims, pause, loggers usage
}

func (f footprint) total() int64 {
	return f.daemon.kib + f.shims.kib + f.pause.kib + f.loggers.kib
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// footprint measures the daemon (PID daemon; none if 0), the node's shims and their
// pause and logger children. A process that exits while it is measured is left out.
func (n *node) footprint(daemon int) footprint {
	n.t.Helper()
	var f footprint
	add := func(u *usage, pid int) {
		if kib, ok := pss(pid); ok {
			u.procs++
			u.kib += kib
		}
	}
	if daemon > 0 {
		add(&f.daemon, daemon)
	}
	procs := processes(n.t)
	shims := n.shimsIn(procs)
	for pid := range shims {
		add(&f.shims, pid)
	}
	for _, p := range procs {
		if !shims[p.ppid] || len(p.args) < 2 {
			continue
		}
		switch p.args[1] {
		case "pause":
			add(&f.pause, p.pid)
		case "logger":
			add(&f.loggers, p.pid)
		}
	}
	return f
}

// shimPIDs returns the node's running shims.
func (n *node) shimPIDs() map[int]bool {
	n.t.Helper()
	return n.shimsIn(processes(n.t))
}

// shimsIn returns the processes among procs that are containerd shims serving the
// node's namespace for the node's containerd (its -address). containerd also runs the
// shim's binary for a moment to start a task or clean up after one, with the action
// ("start", "delete") as the last argument; those are not shims that serve.
func (n *node) shimsIn(procs []process) map[int]bool {
	shims := map[int]bool{}
	for _, p := range procs {
		if len(p.args) == 0 || !strings.HasPrefix(filepath.Base(p.args[0]), "containerd-shim") {
			continue
		}
		if action := p.args[len(p.args)-1]; action == "start" || action == "delete" {
			continue
		}
		if flagValue(p.args, "address") == n.d.Address && flagValue(p.args, "namespace") == n.ns {
			shims[p.pid] = true
		}
	}
	return shims
}

// awaitNoShims waits until the node's shims have exited.
func (n *node) awaitNoShims() {
	n.t.Helper()
	testenv.Await(n.t, "the shims of namespace "+n.ns+" to exit", 30*time.Second, func() bool {
		return len(n.shimPIDs()) == 0
	})
}

// process is a live process as /proc shows it.
type process struct {
	pid, ppid int
	args      []string
}

// processes lists the live processes with their parents and arguments. A process that
// exits while it is read is left out.
func processes(t testing.TB) []process {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold spaces: the state and the parent
		// follow its closing one.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		out = append(out, process{pid: pid, ppid: ppid, args: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")})
	}
	return out
}

// flagValue returns the value of the flag -name or --name, given as a separate argument.
func flagValue(args []string, name string) string {
	i := slices.IndexFunc(args, func(a string) bool { return a == "-"+name || a == "--"+name })
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

// pss returns a process's proportional set size in KiB; ok is false once it has exited.
func pss(pid int) (kib int64, ok bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, found := strings.CutPrefix(s.Text(), "Pss:"); found {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kib, err == nil
		}
	}
	return 0, false
}
