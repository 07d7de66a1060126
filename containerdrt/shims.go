package containerdrt

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// shimProc is a shim process: its PID and the container ID it was started for (its
// -id flag), which is not always one it still serves (see shimGroup).
type shimProc struct {
	PID int
	ID  string
}

// findShims returns the shims of the containerd at address serving namespace ns, found
// by their command line under procRoot (/proc).
func findShims(procRoot, address, ns string) []shimProc {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	var out []shimProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		flags, ok := shimFlags(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"))
		if ok && flags["-namespace"] == ns && flags["-address"] == address {
			out = append(out, shimProc{PID: pid, ID: flags["-id"]})
		}
	}
	return out
}

// killShimsOf kills the shims of the containerd at address still serving namespace
// ns, found under procRoot, and returns how many it killed. It is for a namespace that
// was just deleted, so they serve nothing: containerd asks a shim to shut down after
// its last task is deleted but gives up after a few seconds (a busy machine), and
// then the shim is left running for good.
func killShimsOf(procRoot, address, ns string) int {
	killed := 0
	for _, s := range findShims(procRoot, address, ns) {
		if syscall.Kill(s.PID, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}

// servesNamespace reports whether args are those of a shim of the containerd at
// address serving namespace ns. Another containerd may have a namespace of the same
// name.
func servesNamespace(args []string, address, ns string) bool {
	flags, ok := shimFlags(args)
	return ok && flags["-namespace"] == ns && flags["-address"] == address
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
