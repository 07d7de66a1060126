package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/helper"
	"github.com/staticpod/staticpod/internal/proc"
	"github.com/staticpod/staticpod/logs"
	"github.com/staticpod/staticpod/runner"
)

// A container's log writer, which its shim starts, and a pod's sandbox process run the
// small helper program that the daemon installs under its root dir, not the daemon's
// binary: those two run once per container and once per pod.
func TestLogWriterAndSandboxRunTheHelper(t *testing.T) {
	n := newNode(t)
	n.start()
	// A pod that shares its PID namespace has a sandbox process, its init.
	n.write("shared.yaml", podManifest("shared", "Always", "echo hello; sleep 3600", "  shareProcessNamespace: true\n"))
	c := n.await("the pod running", time.Minute, running("shared-node1/main/0"))["shared-node1/main/0"]
	awaitFile(t, c.LogPath, "stdout F hello")
	installed := filepath.Join(n.path("root"), "bin", helper.Name)
	program, err := os.ReadFile(installed)
	if err != nil {
		t.Fatalf("the helper program is not installed: %v", err)
	}

	writer := logWriterOf(t, c)
	if exe, err := proc.Exe(proc.Root, writer); err != nil || exe != installed {
		t.Errorf("the log writer of %s (pid %d) runs %q (%v), want %s", c.ID, writer, exe, err, installed)
	}

	var sandbox *runner.Container
	all, err := n.rt.List(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range all {
		if sb.Kind == runner.KindSandbox && sb.PodUID == c.PodUID {
			sandbox = &sb
		}
	}
	if sandbox == nil || sandbox.PID == 0 {
		t.Fatalf("pod %s has no sandbox process: %+v", c.PodName, sandbox)
	}
	// It runs from a root of its own, where the program has another name: compare what
	// it runs.
	exe, err := os.ReadFile(proc.Path(proc.Root, int(sandbox.PID), "exe"))
	if args := processArgs(int(sandbox.PID)); err != nil || !bytes.Equal(exe, program) || len(args) < 2 || args[1] != "pause" {
		t.Errorf("the sandbox process %d runs %v, %d bytes (%v); want %s pause (%d bytes)", sandbox.PID, args, len(exe), err, helper.Name, len(program))
	}
}

// logWriterOf returns the PID of c's log writer: the child of c's shim whose command
// is the logger of c's log file.
func logWriterOf(t *testing.T, c runner.Container) int {
	t.Helper()
	shim := parentPID(int(c.PID))
	if shim <= 1 {
		t.Fatalf("container %s (pid %d) has no shim", c.ID, c.PID)
	}
	pids, err := proc.PIDs(proc.Root)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, pid := range pids {
		if parentPID(pid) != shim {
			continue
		}
		args := processArgs(pid)
		seen = append(seen, strings.Join(args, " "))
		if len(args) != 3 || args[1] != logs.Command {
			continue
		}
		if cfg, err := logs.ParseConfig(args[2]); err == nil && cfg.Path == c.LogPath {
			return pid
		}
	}
	t.Fatalf("no log writer of %s among the children of its shim %d: %q", c.LogPath, shim, seen)
	return 0
}

// parentPID returns the parent of process pid, or 0 if it is gone.
func parentPID(pid int) int {
	st, _ := proc.ReadStat(proc.Root, pid)
	return st.PPID
}

// processArgs returns the command line of process pid; none if it is gone.
func processArgs(pid int) []string {
	args, _ := proc.Cmdline(proc.Root, pid)
	return args
}
