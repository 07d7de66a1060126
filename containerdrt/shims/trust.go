package shims

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/pkg/identifiers"
	"golang.org/x/sys/unix"

	"github.com/staticpod/staticpod/internal/proc"
)

// shimBinaryPrefix begins the name of every containerd shim binary
// (containerd-shim-runc-v2, containerd-shim-kata-v2, ...).
const shimBinaryPrefix = "containerd-shim-"

// trustedShim reports whether process pid under procRoot is a shim containerd started,
// as far as anyone but root could fake, and when it started. It must run as root in
// the host's root directory (see hostRootProcess), from a binary named
// containerd-shim-* that is the file of that name in one of dirs (the directories
// containerd finds its shims in, see shimDirs). A shim whose binary was replaced since
// it started (an upgrade) is taken by the path it was started from.
func trustedShim(procRoot string, pid int, dirs []string) (uint64, bool) {
	if !hostRootProcess(procRoot, pid) {
		return 0, false
	}
	link, err := proc.Exe(procRoot, pid)
	if err != nil {
		return 0, false
	}
	path := strings.TrimSuffix(link, proc.DeletedSuffix)
	name := filepath.Base(path)
	if !strings.HasPrefix(name, shimBinaryPrefix) {
		return 0, false
	}
	if path != link { // replaced: the file it ran is gone
		if !slices.Contains(dirs, filepath.Dir(path)) {
			return 0, false
		}
	} else if !slices.ContainsFunc(dirs, func(dir string) bool { return runs(procRoot, pid, filepath.Join(dir, name)) }) {
		return 0, false
	}
	_, start, ok := parentAndStart(procRoot, pid)
	return start, ok
}

// hostRootProcess reports whether process pid under procRoot runs as root (a user
// cannot become it) in the host's root directory (a container's processes see
// another). Whatever staticpod trusts does: shims, their log writers, containerd. It
// looks up nothing the process names.
func hostRootProcess(procRoot string, pid int) bool {
	if !ownedByRoot(procRoot, pid) {
		return false
	}
	root, err1 := proc.RootDir(procRoot, pid)
	host, err2 := os.Stat("/")
	return err1 == nil && err2 == nil && os.SameFile(root, host)
}

// trustedLogWriter reports whether process pid under procRoot, known to run as root
// in the host's root directory (see hostRootProcess), runs helper, the binary
// staticpod has shims start as log writers (containerdrt's Config.Self), or ran the
// file that was at helper's path before it was replaced (an upgrade: the file is
// gone). A container's main process is its shim's child too, and may name itself a
// log writer.
func trustedLogWriter(procRoot string, pid int, helper string) bool {
	if helper == "" {
		return false
	}
	link, err := proc.Exe(procRoot, pid)
	if err != nil {
		return false
	}
	if path, replaced := strings.CutSuffix(link, proc.DeletedSuffix); replaced {
		resolved, err := filepath.EvalSymlinks(helper)
		return err == nil && path == resolved
	}
	return runs(procRoot, pid, helper)
}

// ownedByRoot reports whether process pid under procRoot runs as root: real and
// effective user 0, from its status file.
func ownedByRoot(procRoot string, pid int) bool {
	st, err := proc.ReadStatus(procRoot, pid)
	return err == nil && st.UIDs[0] == 0 && st.UIDs[1] == 0
}

// runs reports whether process pid under procRoot runs the file at path, its symlinks
// followed.
func runs(procRoot string, pid int, path string) bool {
	exe, err1 := proc.ExeFile(procRoot, pid)
	fi, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(exe, fi)
}

// shimDirs returns the directories containerd runs shims from: those of PATH (it looks
// a shim up there), and the directory of the containerd binary that serves address
// among daemons (it looks next to itself when PATH has none; daemons run as root in
// the host's root directory, see scan), else that of the containerd on PATH.
func shimDirs(procRoot string, address socket, daemons []Proc) []string {
	dirs := filepath.SplitList(os.Getenv("PATH"))
	for _, d := range daemons {
		sockets, _ := proc.ListeningUnixSockets(procRoot, d.PID)
		if !slices.ContainsFunc(sockets, func(s string) bool { return socketOf(s).is(address) }) {
			continue
		}
		exe, err := proc.Exe(procRoot, d.PID)
		if _, start, ok := parentAndStart(procRoot, d.PID); err == nil && ok && start == d.Start {
			return append(dirs, filepath.Dir(strings.TrimSuffix(exe, proc.DeletedSuffix)))
		}
	}
	if bin, err := exec.LookPath("containerd"); err == nil {
		if bin, err := filepath.EvalSymlinks(bin); err == nil {
			dirs = append(dirs, filepath.Dir(bin))
		}
	}
	return dirs
}

// isContainerID reports whether id is one staticpod gives its containers and sandboxes
// (see containerdrt's makeID): an identifier containerd accepts, so a plain path
// component, of three or four fields joined by "_" of which the one before the last
// is the attempt.
func isContainerID(id string) bool {
	if identifiers.Validate(id) != nil {
		return false
	}
	fields := strings.Split(id, "_")
	n := len(fields)
	if n != 3 && n != 4 {
		return false
	}
	_, err := strconv.ParseUint(fields[n-2], 10, 32)
	return err == nil
}

// ErrOtherProcess is Signal's error when the PID names a process that started
// at another time than the one looked at: that one is gone, and its PID reused.
var ErrOtherProcess = errors.New("the PID names another process now")

// Signal sends sig to process pid if it is still the one that started at start
// (clock ticks since boot, as its stat file under procRoot says): a process looked at
// a moment ago may be gone and its PID another's by now. A pidfd holds the process
// while its start is checked, so that the signal reaches that process or none; where
// the kernel has no pidfds (before Linux 5.3), the check comes just before the signal.
func Signal(procRoot string, pid int, start uint64, sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		defer unix.Close(fd)
	case errors.Is(err, unix.ENOSYS):
		fd = -1
	default:
		return fmt.Errorf("signal process %d: %w", pid, err)
	}
	if _, now, ok := parentAndStart(procRoot, pid); !ok || now != start {
		return fmt.Errorf("signal process %d: %w", pid, ErrOtherProcess)
	}
	if fd < 0 {
		err = unix.Kill(pid, sig)
	} else {
		err = unix.PidfdSendSignal(fd, sig, nil, 0)
	}
	if err != nil {
		return fmt.Errorf("signal process %d: %w", pid, err)
	}
	return nil
}
