package shims

import (
	"path/filepath"
	"strings"
	"syscall"

	"github.com/staticpod/staticpod/internal/proc"
	"github.com/staticpod/staticpod/logs"
)

// Proc is a shim process: its PID, when it started (in clock ticks since boot: the
// PID names this process only while a process of that start has it) and the
// container ID it was started for (its -id flag), which is not always one it still
// serves (see containerdrt's shimGroup). ID is "" when the flag is no staticpod
// container ID.
type Proc struct {
	PID   int
	Start uint64
	ID    string
}

// LogWriter is a log writer a shim started (logs.Command): its PID, its shim's, the
// configuration it was given (which names its log file) and when it started, in clock
// ticks since boot.
type LogWriter struct {
	PID, Shim int
	Config    string
	Start     uint64
}

// shimCandidate is a process with a shim's command line for the namespace looked for,
// run by root in the host's root directory, not yet checked further.
type shimCandidate struct {
	Proc
	address string // its -address
}

// scan returns the shims of the containerd at address serving namespace ns, and the
// log writers they started from the binary helper (containerdrt's Config.Self; none
// if ""), found under procRoot (/proc). A process is taken for a shim by its command
// line (-namespace ns, -address naming the same socket as address) only when it is
// containerd's too: run by root from a containerd shim binary (see trustedShim).
// Anyone can start a process with such a command line.
//
// A process whose command line may be one of those must first run as root in the
// host's root directory, which looks nothing up: nothing it names is looked up before
// (a path of a user's choosing, on an automount or a network file system, could hold
// up the scan). Its start time, read before its command line is read again and once
// more after it was judged, tells it from a process that took its PID meanwhile: that
// one's trust would go with the first one's command line.
func scan(procRoot, address, ns, helper string) ([]Proc, []LogWriter) {
	pids, err := proc.PIDs(procRoot)
	if err != nil {
		return nil, nil
	}
	var candidates []shimCandidate
	var daemons []Proc // processes named containerd: one of them listens on address
	var loggers []LogWriter
	for _, pid := range pids {
		if args, ok := readArgs(procRoot, pid); !ok || !mayBeOurs(args, ns) {
			continue // most processes: one read each
		}
		ppid, start, ok := parentAndStart(procRoot, pid)
		if !ok || !hostRootProcess(procRoot, pid) {
			continue
		}
		args, ok := readArgs(procRoot, pid)
		if !ok {
			continue
		}
		still := func() bool {
			p, s, ok := parentAndStart(procRoot, pid)
			return ok && p == ppid && s == start
		}
		switch flags, ok := shimFlags(args); {
		case ok && flags["-namespace"] == ns:
			id := flags["-id"]
			if !isContainerID(id) {
				id = ""
			}
			// trustedShim reads the start time again.
			candidates = append(candidates, shimCandidate{Proc{PID: pid, Start: start, ID: id}, flags["-address"]})
		case ok:
		case filepath.Base(args[0]) == "containerd":
			daemons = append(daemons, Proc{PID: pid, Start: start}) // see shimDirs
		case isLogWriter(args) && trustedLogWriter(procRoot, pid, helper) && still():
			loggers = append(loggers, LogWriter{PID: pid, Shim: ppid, Config: args[2], Start: start})
		}
	}
	var shims []Proc
	if len(candidates) > 0 {
		target := socketOf(address)
		dirs := shimDirs(procRoot, target, daemons)
		same := map[string]bool{} // -address -> whether it is target: most shims name one
		for _, c := range candidates {
			start, ok := trustedShim(procRoot, c.PID, dirs)
			if !ok || start != c.Start {
				continue
			}
			is, seen := same[c.address]
			if !seen {
				is = socketOf(c.address).is(target)
				same[c.address] = is
			}
			if is {
				shims = append(shims, c.Proc)
			}
		}
	}
	ours := make(map[int]bool, len(shims))
	for _, s := range shims {
		ours[s.PID] = true
	}
	kept := loggers[:0]
	for _, l := range loggers {
		if ours[l.Shim] {
			kept = append(kept, l)
		}
	}
	return shims, kept
}

// parentAndStart reads the parent PID and start time of process pid under procRoot.
func parentAndStart(procRoot string, pid int) (int, uint64, bool) {
	st, err := proc.ReadStat(procRoot, pid)
	return st.PPID, st.StartTime, err == nil
}

// readArgs reads the command line of process pid under procRoot; not ok when it has
// none.
func readArgs(procRoot string, pid int) ([]string, bool) {
	args, err := proc.Cmdline(procRoot, pid)
	return args, err == nil && len(args) > 0
}

// mayBeOurs reports whether args, a process's command line, may be that of a shim
// serving namespace ns, of containerd or of a log writer (see scan).
func mayBeOurs(args []string, ns string) bool {
	flags, shim := shimFlags(args)
	return shim && flags["-namespace"] == ns || filepath.Base(args[0]) == "containerd" || isLogWriter(args)
}

// isLogWriter reports whether args are the command line of a log writer
// (logs.Command), whatever its binary.
func isLogWriter(args []string) bool {
	return len(args) == 3 && args[1] == logs.Command
}

// Find returns the shims of the containerd at address serving namespace ns, found
// under procRoot (/proc).
func Find(procRoot, address, ns string) []Proc {
	shims, _ := scan(procRoot, address, ns, "")
	return shims
}

// Gone reports whether shim s has exited: its PID names no process, a zombie, or
// another process.
func Gone(procRoot string, s Proc) bool {
	st, err := proc.ReadStat(procRoot, s.PID)
	return err != nil || st.State == "Z" || st.StartTime != s.Start
}

// Kill kills the shims of the containerd at address still serving namespace
// ns, found under procRoot, and returns how many it killed. It is for a namespace that
// was just deleted, so they serve nothing: containerd asks a shim to shut down after
// its last task is deleted but gives up after a few seconds (a busy machine), and
// then the shim is left running for good.
func Kill(procRoot, address, ns string) int {
	killed := 0
	for _, s := range Find(procRoot, address, ns) {
		if Signal(procRoot, s.PID, s.Start, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}

// shimFlags returns the flags of a shim's command line args, and whether args are a
// shim's at all.
func shimFlags(args []string) (map[string]string, bool) {
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return nil, false
	}
	flags := map[string]string{}
	for i := 1; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			flags[args[i]] = args[i+1]
		}
	}
	return flags, true
}
