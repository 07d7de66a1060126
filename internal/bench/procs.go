package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/internal/testenv"
)

// statFields are the fields of /proc/<pid>/stat after the command name, which is in
// parentheses and may hold spaces: fields[0] is the state (field 3 of proc(5)).
func statFields(pid int) ([]string, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])), nil
}

// CPUTicks is the user and system time a process has used, in clock ticks
// (USER_HZ, 100 a second on Linux).
func CPUTicks(pid int) (int64, error) {
	fields, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, fields[11], fields[12])
	}
	return utime + stime, nil
}

// ticksPerSecond is USER_HZ, which Linux fixes at 100 for user space.
const ticksPerSecond = 100

// PSS returns a process's proportional set size in KiB; ok is false once it has exited.
func PSS(pid int) (kib int64, ok bool) {
	return procValue(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:")
}

// RSS returns a process's resident set size in KiB; ok is false once it has exited.
func RSS(pid int) (kib int64, ok bool) {
	return procValue(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
}

// procValue reads the "<key> <n> kB" line of a /proc file.
func procValue(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, found := strings.CutPrefix(s.Text(), key); found {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kib, err == nil
		}
	}
	return 0, false
}

// Processes lists the live processes with their parents and arguments.
func Processes() ([]testenv.Process, error) { return testenv.Processes() }

// Shims returns the processes among procs that are containerd shims serving namespace
// ns for the containerd at address (their -address names the same socket, however
// either is spelled: see containerdrt.SameSocket). containerd also runs the shim's
// binary for a moment to start a task or clean up after one, with the action ("start",
// "delete") as the last argument; those are not shims that serve.
func Shims(procs []testenv.Process, address, ns string) map[int]bool {
	shims := map[int]bool{}
	for _, p := range procs {
		if len(p.Args) == 0 || !strings.HasPrefix(filepath.Base(p.Args[0]), "containerd-shim") {
			continue
		}
		if action := p.Args[len(p.Args)-1]; action == "start" || action == "delete" {
			continue
		}
		if flagValue(p.Args, "namespace") == ns && containerdrt.SameSocket(flagValue(p.Args, "address"), address) {
			shims[p.PID] = true
		}
	}
	return shims
}

// flagValue returns the value of the flag -name or --name, given as a separate argument.
func flagValue(args []string, name string) string {
	i := slices.IndexFunc(args, func(a string) bool { return a == "-"+name || a == "--"+name })
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

// Usage is what the processes of one kind cost.
type Usage struct {
	Procs int   `json:"procs"`
	KiB   int64 `json:"kib"` // PSS, summed
}

// Footprint is what staticpod's processes on a node cost, by kind: the daemon, the
// shims of its namespace, and the shims' pause and logger children. The apps are left
// out: they are the user's.
type Footprint struct {
	Daemon, Shims, Pause, Loggers Usage
}

// Total is the PSS of every kind.
func (f Footprint) Total() int64 {
	return f.Daemon.KiB + f.Shims.KiB + f.Pause.KiB + f.Loggers.KiB
}

// Measure reads the footprint of the daemon with PID daemon (none if 0) and of the
// shims serving ns for the containerd at address. The processes are told apart by what
// they are: pause processes and log writers are the shims' children whose first
// argument is "pause" or "logger", whatever binary runs them. A process that exits
// while it is measured is left out.
func Measure(daemon int, address, ns string) (Footprint, error) {
	var f Footprint
	add := func(u *Usage, pid int) {
		if kib, ok := PSS(pid); ok {
			u.Procs++
			u.KiB += kib
		}
	}
	if daemon > 0 {
		add(&f.Daemon, daemon)
	}
	procs, err := Processes()
	if err != nil {
		return f, err
	}
	shims := Shims(procs, address, ns)
	for pid := range shims {
		add(&f.Shims, pid)
	}
	for _, p := range procs {
		if !shims[p.PPID] || len(p.Args) < 2 {
			continue
		}
		switch p.Args[1] {
		case "pause":
			add(&f.Pause, p.PID)
		case "logger":
			add(&f.Loggers, p.PID)
		}
	}
	return f, nil
}
