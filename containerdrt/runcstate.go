package containerdrt

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// runcRoot is where containerd's runc shim has runc keep its state, one directory per
// namespace and container (the shim's default).
const runcRoot = "/run/containerd/runc"

// errRuncStateExists is how runc refuses to create a container whose state it still
// keeps.
const errRuncStateExists = "container with given ID already exists"

// removeStaleRuncState removes the state runc keeps under root for container id of
// namespace ns when its init process is gone, and reports whether it did. A containerd
// that lost its own state (killed, its state directory removed) leaves runc's behind,
// and runc then refuses the same container ID, which staticpod makes again for the
// same pod and attempt, at every try. State whose process still runs is left alone;
// so is state that cannot be read.
func removeStaleRuncState(root, ns, id string) bool {
	dir := filepath.Join(root, ns, id)
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return false
	}
	var state struct {
		InitProcessPid int `json:"init_process_pid"`
	}
	if json.Unmarshal(data, &state) != nil || state.InitProcessPid <= 0 || alive(state.InitProcessPid) {
		return false
	}
	return os.RemoveAll(dir) == nil
}

// alive reports whether a process pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	return err != nil || !strings.Contains(string(stat), ") Z ")
}
