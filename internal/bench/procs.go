package bench

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/internal/proc"
	"github.com/staticpod/staticpod/internal/testenv"
)

// CPUTicks is the user and system time a process has used, in clock ticks
// (USER_HZ, 100 a second on Linux).
func CPUTicks(pid int) (int64, error) {
	st, err := proc.ReadStat(proc.Root, pid)
	if err != nil {
		return 0, err
	}
	return int64(st.UTime + st.STime), nil
}

// ticksPerSecond is USER_HZ, which Linux fixes at 100 for user space.
const ticksPerSecond = 100

// ReadSmaps reads a process's smaps_rollup (see proc.Smaps); ok is false once it has
// exited.
func ReadSmaps(pid int) (s proc.Smaps, ok bool) {
	s, err := proc.SmapsRollup(proc.Root, pid)
	return s, err == nil
}

// RSS returns a process's resident set size in KiB; ok is false once it has exited.
func RSS(pid int) (kib int64, ok bool) {
	st, err := proc.ReadStatus(proc.Root, pid)
	return st.RSS, err == nil && st.HasRSS
}

// Processes lists the live processes with their parents and arguments.
func Processes() ([]testenv.Process, error) { return testenv.Processes() }

// Shims returns the processes among procs that are containerd shims serving namespace
// ns for the containerd at address (their -address names the same socket, however
// either is spelled: see shims.SameSocket). containerd also runs the shim's binary
// for a moment to start a task or clean up after one, with the action ("start",
// "delete") as the last argument; those are not shims that serve.
func Shims(procs []testenv.Process, address, ns string) map[int]bool {
	found := map[int]bool{}
	for _, p := range procs {
		if len(p.Args) == 0 || !strings.HasPrefix(filepath.Base(p.Args[0]), "containerd-shim") {
			continue
		}
		if action := p.Args[len(p.Args)-1]; action == "start" || action == "delete" {
			continue
		}
		if flagValue(p.Args, "namespace") == ns && shims.SameSocket(flagValue(p.Args, "address"), address) {
			found[p.PID] = true
		}
	}
	return found
}

// flagValue returns the value of the flag -name or --name, given as a separate argument.
func flagValue(args []string, name string) string {
	i := slices.IndexFunc(args, func(a string) bool { return a == "-"+name || a == "--"+name })
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}
