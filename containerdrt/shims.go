package containerdrt

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// killShimsOf kills the shims of the containerd at address still serving namespace
// ns, found by their command line under procRoot (/proc), and returns how many it
// killed. It is for a namespace that
// was just deleted, so they serve nothing: containerd asks a shim to shut down after
// its last task is deleted but gives up after a few seconds (a busy machine), and
// then the shim is left running for good.
func killShimsOf(procRoot, address, ns string) int {
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
		if err != nil || !servesNamespace(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), address, ns) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}

// servesNamespace reports whether args are those of a shim of the containerd at
// address serving namespace ns. Another containerd may have a namespace of the same
// name.
func servesNamespace(args []string, address, ns string) bool {
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return false
	}
	flags := map[string]string{}
	for i := 1; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			flags[args[i]] = args[i+1]
		}
	}
	return flags["-namespace"] == ns && flags["-address"] == address
}
