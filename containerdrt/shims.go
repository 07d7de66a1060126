package containerdrt

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// killShimsOf kills the shims still serving namespace ns, found by their command line
// under procRoot (/proc), and returns how many it killed. It is for a namespace that
// was just deleted, so they serve nothing: containerd asks a shim to shut down after
// its last task is deleted but gives up after a few seconds (a busy machine), and
// then the shim is left running for good.
func killShimsOf(procRoot, ns string) int {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return 0
	}
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "cmdline"))
		if err != nil || !servesNamespace(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), ns) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}

// servesNamespace reports whether args are those of a containerd shim of namespace ns.
func servesNamespace(args []string, ns string) bool {
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return false
	}
	for i := 1; i+1 < len(args); i++ {
		if args[i] == "-namespace" && args[i+1] == ns {
			return true
		}
	}
	return false
}
