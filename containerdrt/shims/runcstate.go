package shims

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/staticpod/staticpod/internal/proc"
)

// RuncRoot is where containerd's runc shim has runc keep its state, one directory per
// namespace and container (the shim's default).
const RuncRoot = "/run/containerd/runc"

// RuncStateExists is how runc refuses to create a container whose state it still
// keeps.
const RuncStateExists = "container with given ID already exists"

// RemoveStaleRuncState removes the state runc keeps under root for container id of
// namespace ns when its init process is gone, and reports whether it did. A containerd
// that lost its own state (killed, its state directory removed) leaves runc's behind,
// and runc then refuses the same container ID, which staticpod makes again for the
// same pod and attempt, at every try. State whose process still runs is left alone;
// so is state that cannot be read.
func RemoveStaleRuncState(root, ns, id string) bool {
	dir := filepath.Join(root, ns, id)
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return false
	}
	var state struct {
		InitProcessPid int `json:"init_process_pid"`
	}
	if json.Unmarshal(data, &state) != nil || state.InitProcessPid <= 0 || Alive(state.InitProcessPid) {
		return false
	}
	return os.RemoveAll(dir) == nil
}

// Alive reports whether a process pid exists and is not a zombie.
func Alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := proc.ReadStat(proc.Root, pid)
	return err != nil || st.State != "Z"
}

// StaleBundle returns the bundle directory named by err when err is containerd's
// refusal to create a task of container id in namespace ns because that directory is
// there already (`mkdir <state>/io.containerd.runtime.v2.task/<ns>/<id>: file exists`).
func StaleBundle(err error, ns, id string) (string, bool) {
	if err == nil {
		return "", false
	}
	msg := err.Error()
	i, j := strings.Index(msg, "mkdir /"), strings.Index(msg, ": file exists")
	if i < 0 || j < i {
		return "", false
	}
	path := msg[i+len("mkdir ") : j]
	if filepath.Base(path) != id || filepath.Base(filepath.Dir(path)) != ns {
		return "", false
	}
	return path, true
}

// bundleSettle is how old a bundle with no shim must be to be taken for one left
// behind: a creation under way makes its shim within milliseconds of its bundle.
const bundleSettle = 2 * time.Second

// RemoveStaleBundle removes the task bundle at path of container id of namespace ns,
// and the renamed copy containerd leaves when it fails to delete one (.<id>), with
// their rootfs mounts, when no shim of the containerd at address serving ns (found
// under procRoot) was started for id and the bundle is older than bundleSettle.
// containerd leaves such a bundle when the deletion of a task's shim fails (a creation
// its client cancelled, racing the shim), and then refuses every later task of the
// same container ID until it restarts. It reports whether it removed it, and why not
// when that is worth reporting. It removes in the namespace's bundle directory only,
// opened without following symlinks (openBundleDir).
func RemoveStaleBundle(procRoot, address, ns, path, id string) (bool, error) {
	dir, err := openBundleDir(path, ns, id)
	if err != nil {
		return false, err
	}
	defer dir.Close()
	st, err := dir.root.Lstat(id)
	if err != nil || !st.IsDir() || time.Since(st.ModTime()) < bundleSettle {
		return false, nil
	}
	for _, s := range Find(procRoot, address, ns) {
		if s.ID == id {
			return false, nil // it serves the container, or ends: see Lost
		}
	}
	for _, name := range []string{id, "." + id} {
		if err := dir.remove(name); err != nil {
			return false, err
		}
	}
	return true, nil
}
