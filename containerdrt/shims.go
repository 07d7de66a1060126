package containerdrt

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/staticpod/staticpod/logs"
)

// shimProc is a shim process: its PID, when it started (in clock ticks since boot:
// the PID names this process only while a process of that start has it) and the
// container ID it was started for (its -id flag), which is not always one it still
// serves (see shimGroup). ID is "" when the flag is no staticpod container ID.
type shimProc struct {
	PID   int
	Start uint64
	ID    string
}

// loggerProc is a log writer a shim started (logs.Command): its PID, its shim's, the
// configuration it was given (which names its log file) and when it started, in clock
// ticks since boot.
type loggerProc struct {
	PID, Shim int
	Config    string
	Start     uint64
}

// scanShims returns the shims of the containerd at address serving namespace ns, and
// the log writers they started, found under procRoot (/proc). A process is taken for a
// shim by its command line (-namespace ns, -address naming the same socket as address)
// only when it is containerd's too: run by root from a containerd shim binary (see
// trustedShim). Anyone can start a process with such a command line.
func scanShims(procRoot, address, ns string) ([]shimProc, []loggerProc) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, nil
	}
	target := socketOf(address)
	var candidates []shimProc
	var daemons []int // processes named containerd: one of them listens on address
	var loggers []loggerProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		switch flags, ok := shimFlags(args); {
		case ok && flags["-namespace"] == ns && socketOf(flags["-address"]).is(target):
			id := flags["-id"]
			if !isContainerID(id) {
				id = ""
			}
			candidates = append(candidates, shimProc{PID: pid, ID: id})
		case ok:
		case filepath.Base(args[0]) == "containerd":
			daemons = append(daemons, pid)
		case len(args) == 3 && args[1] == logs.Command:
			if ppid, start, ok := parentAndStart(filepath.Join(procRoot, e.Name(), "stat")); ok {
				loggers = append(loggers, loggerProc{PID: pid, Shim: ppid, Config: args[2], Start: start})
			}
		}
	}
	var shims []shimProc
	if len(candidates) > 0 {
		dirs := shimDirs(procRoot, target, daemons)
		for _, s := range candidates {
			if start, ok := trustedShim(procRoot, s.PID, dirs); ok {
				s.Start = start
				shims = append(shims, s)
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

// parentAndStart reads a process's parent PID and start time from its stat file.
func parentAndStart(path string) (int, uint64, bool) {
	stat, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	// The command name, in parentheses, may hold anything: the fields follow its end.
	end := strings.LastIndexByte(string(stat), ')')
	if end < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(stat[end+1:])) // state, ppid, ... starttime (the 22nd of all)
	if len(fields) < 20 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(fields[1])
	start, err2 := strconv.ParseUint(fields[19], 10, 64)
	return ppid, start, err1 == nil && err2 == nil
}

// findShims returns the shims of the containerd at address serving namespace ns.
func findShims(procRoot, address, ns string) []shimProc {
	shims, _ := scanShims(procRoot, address, ns)
	return shims
}

// killShimsOf kills the shims of the containerd at address still serving namespace
// ns, found under procRoot, and returns how many it killed. It is for a namespace that
// was just deleted, so they serve nothing: containerd asks a shim to shut down after
// its last task is deleted but gives up after a few seconds (a busy machine), and
// then the shim is left running for good.
func killShimsOf(procRoot, address, ns string) int {
	killed := 0
	for _, s := range findShims(procRoot, address, ns) {
		if signalProcess(procRoot, s.PID, s.Start, syscall.SIGKILL) == nil {
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
