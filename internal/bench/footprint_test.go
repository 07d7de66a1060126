package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/internal/proc"
	"github.com/staticpod/staticpod/internal/testenv"
)

const sock = "/run/ctd/containerd.sock"

func shimProc(pid int, ns string, action ...string) testenv.Process {
	return testenv.Process{PID: pid, PPID: 1, Args: append([]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", ns, "-id", "x", "-address", sock}, action...)}
}

func child(pid, ppid int, args ...string) testenv.Process {
	return testenv.Process{PID: pid, PPID: ppid, Args: args}
}

// The node's processes as a user counts them: the daemon, the shims of its namespace
// and their helper children, whichever of staticpod's binaries runs them; not the
// apps, even one that calls itself "logger", nor another namespace's processes.
func TestClassifyPicksTheDaemonShimsAndHelpers(t *testing.T) {
	procs := []testenv.Process{
		child(100, 1, "/usr/local/bin/staticpod", "run"),
		shimProc(10, "staticpod"),
		shimProc(11, "staticpod"),
		shimProc(12, "other"),
		shimProc(13, "staticpod", "delete"),
		child(20, 10, "/var/lib/staticpod/bin/staticpod-helper", "logger", "path=%2Fvar%2Flog"),
		child(21, 10, "sh", "-c", "sleep 3600"),
		child(22, 11, "/staticpod", "pause"),
		child(23, 11, "/var/lib/staticpod/bin/staticpod", "logger", "path=x"), // built without the helper
		child(24, 11, "/bin/logger", "logger", "-t", "app"),                   // an app
		child(25, 12, "/var/lib/staticpod/bin/staticpod-helper", "logger", "path=y"),
		child(26, 21, "sleep", "3600"),
	}
	want := map[int]Kind{100: KindDaemon, 10: KindShim, 11: KindShim, 20: KindLogger, 22: KindPause, 23: KindLogger}
	if diff := cmp.Diff(want, Classify(procs, 100, sock, "staticpod")); diff != "" {
		t.Errorf("Classify (-want +got):\n%s", diff)
	}
	delete(want, 100)
	if diff := cmp.Diff(want, Classify(procs, 0, sock, "staticpod")); diff != "" {
		t.Errorf("Classify without a daemon (-want +got):\n%s", diff)
	}
}

// A second daemon of the same binary, another containerd's shims and the helper of
// another root that is the same file (a hard link) share pages with the set; the apps
// and a copy of the helper do not.
func TestSharersCountsOtherProcessesOfTheSameBinaries(t *testing.T) {
	staticpod, shim, helper, helperCopy, busybox := FileID{1, 1}, FileID{1, 2}, FileID{1, 3}, FileID{1, 4}, FileID{2, 1}
	exe := map[int]FileID{
		100: staticpod, 10: shim, 20: helper, 21: busybox, // the set, and its app
		200: staticpod, 30: shim, 31: shim, 40: helper, 41: helperCopy, 50: busybox,
	}
	var procs []testenv.Process
	for pid := range exe {
		procs = append(procs, testenv.Process{PID: pid})
	}
	procs = append(procs, testenv.Process{PID: 2}) // a kernel thread: no exe
	set := map[int]Kind{100: KindDaemon, 10: KindShim, 20: KindLogger}
	lookup := func(pid int) (FileID, bool) { id, ok := exe[pid]; return id, ok }
	if got := Sharers(procs, set, lookup); got != 4 {
		t.Errorf("Sharers = %d, want 4 (the second daemon, two shims, the linked helper)", got)
	}
	alone := []testenv.Process{{PID: 100}, {PID: 10}, {PID: 20}, {PID: 21}}
	if got := Sharers(alone, set, lookup); got != 0 {
		t.Errorf("Sharers with staticpod alone = %d, want 0", got)
	}
}

// Sum adds the smaps of each kind; a process that exited meanwhile is left out.
func TestSumAddsUpByKindAndLeavesOutTheGone(t *testing.T) {
	set := map[int]Kind{1: KindDaemon, 2: KindShim, 3: KindShim, 4: KindLogger, 5: KindLogger}
	smaps := map[int]proc.Smaps{
		1: {PSS: 40000, PSSAnon: 13000, PSSFile: 27000},
		2: {PSS: 3000, PSSAnon: 2500, PSSFile: 500},
		3: {PSS: 3100, PSSAnon: 2600, PSSFile: 500},
		4: {PSS: 660, PSSAnon: 560, PSSFile: 100},
	}
	got := Sum(set, func(pid int) (proc.Smaps, bool) { s, ok := smaps[pid]; return s, ok })
	want := Footprint{
		Daemon:  Usage{Procs: 1, KiB: 40000, Anon: 13000, File: 27000},
		Shims:   Usage{Procs: 2, KiB: 6100, Anon: 5100, File: 1000},
		Loggers: Usage{Procs: 1, KiB: 660, Anon: 560, File: 100},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sum (-want +got):\n%s", diff)
	}
	if got.Total() != 46760 {
		t.Errorf("Total = %d, want 46760", got.Total())
	}
}

// The total row names what it holds, is held against the floor measured the same way
// with its target, and says when other processes shared the binaries.
func TestFootprintRowsTotalAgainstTheFloor(t *testing.T) {
	fp := Footprint{Daemon: Usage{Procs: 1, KiB: 40 * 1024, File: 27 * 1024, Anon: 13 * 1024},
		Shims: Usage{Procs: 20, KiB: 58 * 1024}, Loggers: Usage{Procs: 20, KiB: 13 * 1024}, Sharers: 3}
	rows := footprintRows(20, 60e9, []Footprint{fp, fp, fp}, 55, 0)
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	wantIDs := []string{"footprint/net=bridge/pods=20/daemon", "footprint/net=bridge/pods=20/shims", "footprint/net=bridge/pods=20/pause", "footprint/net=bridge/pods=20/loggers", "footprint/net=bridge/pods=20/total"}
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Fatalf("row IDs (-want +got):\n%s", diff)
	}
	total := rows[4]
	if total.Median != 111 || total.Floor != 95 || total.Met == nil || *total.Met {
		t.Errorf("total = %v MiB against a floor of %v, met %v; want 111 against 95 (40 + 55), not met (≤ 100)", total.Median, total.Floor, total.Met)
	}
	for _, want := range []string{"1m0s after the last started", "daemon, shims, sandboxes, log writers"} {
		if !strings.Contains(total.Work, want) {
			t.Errorf("total's work %q does not say %q", total.Work, want)
		}
	}
	if !strings.Contains(total.Note, "3 other processes") {
		t.Errorf("total's note %q does not count the 3 sharers", total.Note)
	}
	if !strings.Contains(rows[0].Note, "27.0 MiB of it the binary's pages, 13.0 MiB anonymous") {
		t.Errorf("daemon's note %q does not split its PSS", rows[0].Note)
	}
	if only := footprintRows(0, 60e9, []Footprint{fp}, 0, 0); len(only) != 1 || only[0].ID != "footprint/net=bridge/pods=0/daemon" {
		t.Errorf("rows at 0 pods = %v, want the daemon's alone", only)
	}
}

// The daemons run with their own Go runtime settings, whatever the benchmark's
// environment holds.
func TestDaemonEnvDropsGoRuntimeSettings(t *testing.T) {
	got := daemonEnv([]string{"PATH=/bin", "GOGC=200", "GOMEMLIMIT=1GiB", "GODEBUG=madvdontneed=1", "GOMAXPROCS=1", "GOGCX=1", "HOME=/root"})
	if diff := cmp.Diff([]string{"PATH=/bin", "GOGCX=1", "HOME=/root"}, got); diff != "" {
		t.Errorf("daemonEnv (-want +got):\n%s", diff)
	}
}
