// Package proc reads what Linux's /proc says of a process: its command line and
// environment, its parent, state, CPU time and start time (stat), its user IDs and
// resident size (status), the file it runs (exe), its root directory (root), its children, the unix
// sockets it listens on and its memory (smaps_rollup). Every function takes the /proc
// directory to read, procRoot (Root, or a test's fake tree), and a PID; none follows a
// path the process names. It is a leaf: it imports nothing of staticpod's, so that
// the runtime, the benchmarks and the test environment parse /proc one way.
package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Root is the host's /proc.
const Root = "/proc"

// Path is the path of file name (or a path below it) in process pid's directory under
// procRoot; with no name, the directory itself.
func Path(procRoot string, pid int, name ...string) string {
	return filepath.Join(append([]string{procRoot, strconv.Itoa(pid)}, name...)...)
}

// PIDs returns the PIDs of the processes under procRoot: its entries named by a number.
func PIDs(procRoot string) ([]int, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes in %s: %w", procRoot, err)
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Cmdline returns the command line of process pid; none (and no error) for a kernel
// thread or a zombie, whose cmdline is empty.
func Cmdline(procRoot string, pid int) ([]string, error) {
	data, err := os.ReadFile(Path(procRoot, pid, "cmdline"))
	if err != nil || len(data) == 0 {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00"), nil
}

// Environ returns the environment process pid started with (what /proc's environ
// holds; a process that changed its own environment since shows the start).
func Environ(procRoot string, pid int) ([]string, error) {
	data, err := os.ReadFile(Path(procRoot, pid, "environ"))
	if err != nil || len(data) == 0 {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00"), nil
}

// Exe returns the target of process pid's exe link: the path of the file it runs,
// ending in " (deleted)" (DeletedSuffix) when that file was replaced or removed since.
func Exe(procRoot string, pid int) (string, error) {
	return os.Readlink(Path(procRoot, pid, "exe"))
}

// DeletedSuffix ends the target of an exe link when the file the process runs was
// replaced or removed since it started it (an upgrade).
const DeletedSuffix = " (deleted)"

// ExeFile returns the file process pid runs, even when its path names another file
// now or none.
func ExeFile(procRoot string, pid int) (fs.FileInfo, error) {
	return os.Stat(Path(procRoot, pid, "exe"))
}

// RootDir returns process pid's root directory, as the file it is: a container's
// processes have one of their own.
func RootDir(procRoot string, pid int) (fs.FileInfo, error) {
	return os.Stat(Path(procRoot, pid, "root"))
}

// Children returns the children of process pid, from the children file of each of its
// threads. It fails when it cannot tell: no thread is listed (the process is gone, or
// the kernel lists no children) or one's file cannot be read.
func Children(procRoot string, pid int) ([]int, error) {
	threads, err := filepath.Glob(Path(procRoot, pid, "task", "*", "children"))
	if err != nil {
		return nil, fmt.Errorf("children of process %d: %w", pid, err)
	}
	if len(threads) == 0 {
		return nil, fmt.Errorf("children of process %d: %w", pid, fs.ErrNotExist)
	}
	var children []int
	for _, t := range threads {
		data, err := os.ReadFile(t)
		if err != nil {
			return nil, fmt.Errorf("children of process %d: %w", pid, err)
		}
		for _, f := range strings.Fields(string(data)) {
			child, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("children of process %d: %q is no PID", pid, f)
			}
			children = append(children, child)
		}
	}
	return children, nil
}

// errNoSocket is ListeningUnixSockets's error when the process listens on none.
var errNoSocket = errors.New("listens on no unix socket")

// ListeningUnixSockets returns the paths of the unix sockets process pid listens on,
// found from its descriptors and its network namespace's table of unix sockets. It
// fails when there is none.
func ListeningUnixSockets(procRoot string, pid int) ([]string, error) {
	fds, err := os.ReadDir(Path(procRoot, pid, "fd"))
	if err != nil {
		return nil, fmt.Errorf("descriptors of process %d: %w", pid, err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(Path(procRoot, pid, "fd", fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	f, err := os.Open(Path(procRoot, pid, "net", "unix"))
	if err != nil {
		return nil, fmt.Errorf("unix sockets of process %d: %w", pid, err)
	}
	defer f.Close()
	// Num RefCount Protocol Flags Type St Inode Path; a listening socket has the flag
	// __SO_ACCEPTCON (00010000) and state 01 (unconnected).
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 8 && fields[3] == "00010000" && fields[5] == "01" && inodes[fields[6]] {
			out = append(out, fields[7])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("unix sockets of process %d: %w", pid, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("process %d %w", pid, errNoSocket)
	}
	return out, nil
}
