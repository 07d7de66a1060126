package shims

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/staticpod/staticpod/internal/proc"
)

// pluginExitWait bounds the wait for killed plugin runs to be gone.
const pluginExitWait = 5 * time.Second

// EndPluginRuns kills the CNI plugins still running for sandbox id, as a staticpod
// killed during the sandbox's network setup leaves them (they are its children, and
// outlive it), and waits for them to be gone: a teardown that ran beside one would
// leave what it adds after. A plugin run is a process of root's whose file is in one of
// binDirs and whose environment names the sandbox (CNI_CONTAINERID, which the CNI
// library sets for each plugin it runs and which the plugins pass to the IPAM plugins
// they run). It returns the PIDs it killed; those it could not wait out are still
// listed.
func EndPluginRuns(procRoot, id string, binDirs []string) []int {
	var killed []int
	pids, _ := proc.PIDs(procRoot)
	for _, pid := range pids {
		if pid == os.Getpid() || !isPluginRun(procRoot, pid, id, binDirs) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	for deadline := time.Now().Add(pluginExitWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !slices.ContainsFunc(killed, func(pid int) bool { return isPluginRun(procRoot, pid, id, binDirs) }) {
			break
		}
	}
	return killed
}

// isPluginRun reports whether process pid is a CNI plugin that runs for sandbox id.
func isPluginRun(procRoot string, pid int, id string, binDirs []string) bool {
	st, err := proc.ReadStatus(procRoot, pid)
	if err != nil || st.UIDs[0] != 0 {
		return false
	}
	exe, err := proc.Exe(procRoot, pid)
	if err != nil || !slices.Contains(binDirs, filepath.Dir(strings.TrimSuffix(exe, proc.DeletedSuffix))) {
		return false
	}
	env, err := proc.Environ(procRoot, pid)
	return err == nil && slices.Contains(env, "CNI_CONTAINERID="+id)
}
