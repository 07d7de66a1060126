package testenv

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/staticpod/staticpod/internal/proc"
)

// killShims kills the shims started for the daemon at address, with every process under
// them (their containers), waits until they are gone and removes their sockets. Shims
// outlive their daemon by design, so a daemon that stopped with tasks running leaves them
// behind.
func killShims(address string) error {
	procs, err := Processes()
	if err != nil {
		return err
	}
	var sockets []string
	var pids []int
	for _, p := range procs {
		if !isShimFor(p.Args, address) {
			continue
		}
		pids = append(pids, descendants(procs, p.PID)...)
		sockets = append(sockets, shimSockets(p.Args)...)
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := awaitGone(pids, stopTimeout); err != nil {
		return err
	}
	for _, s := range sockets {
		os.Remove(s)
	}
	return nil
}

// shimSockets returns where a shim started with args listens: a hash of its daemon's
// address, namespace and ID, plus "/debug" for its debug socket.
func shimSockets(args []string) []string {
	path := filepath.Join(argValue(args, "address"), argValue(args, "namespace"), argValue(args, "id"))
	var sockets []string
	for _, p := range []string{path, filepath.Join(path, "debug")} {
		sockets = append(sockets, filepath.Join(shimSocketDir, fmt.Sprintf("%x", sha256.Sum256([]byte(p)))))
	}
	return sockets
}

// ShimPIDs returns the running shims whose daemon listens at address.
func ShimPIDs(address string) ([]int, error) {
	procs, err := Processes()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, p := range procs {
		if isShimFor(p.Args, address) {
			pids = append(pids, p.PID)
		}
	}
	return pids, nil
}

// isShimFor reports whether args start a containerd shim with "-address <address>".
func isShimFor(args []string, address string) bool {
	return len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") &&
		argValue(args, "address") == address
}

// argValue returns the value of the flag -name or --name, given as a separate argument.
func argValue(args []string, name string) string {
	i := slices.IndexFunc(args, func(a string) bool { return a == "-"+name || a == "--"+name })
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

// awaitGone polls until none of pids is a live process, or fails after timeout.
func awaitGone(pids []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		alive := slices.DeleteFunc(slices.Clone(pids), func(pid int) bool {
			st, err := proc.ReadStat(proc.Root, pid)
			return err != nil || st.State == "Z"
		})
		if len(alive) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still alive %v after SIGKILL", alive, timeout)
		}
		time.Sleep(pollInterval)
	}
}

// Process is one live (not zombie) process.
type Process struct {
	PID, PPID int
	Args      []string
}

// Processes reads every live process's parent and arguments from /proc. A process that
// exits while it is read is left out.
func Processes() ([]Process, error) {
	pids, err := proc.PIDs(proc.Root)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var procs []Process
	for _, pid := range pids {
		st, err := proc.ReadStat(proc.Root, pid)
		if err != nil || st.State == "Z" {
			continue // exited while we looked, or waiting for its parent to reap it
		}
		args, _ := proc.Cmdline(proc.Root, pid)
		procs = append(procs, Process{PID: pid, PPID: st.PPID, Args: args})
	}
	return procs, nil
}

// descendants returns root and every process below it.
func descendants(procs []Process, root int) []int {
	out := []int{root}
	for i := 0; i < len(out); i++ {
		for _, p := range procs {
			if p.PPID == out[i] {
				out = append(out, p.PID)
			}
		}
	}
	return out
}
