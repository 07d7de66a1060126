// Command staticpod-helper is what staticpod runs once per container and once per
// sandbox: the log writer that containerd's shim starts for a binary:// log URI
// (`staticpod-helper logger CONFIG`) and the pod's sandbox process
// (`staticpod-helper pause`). Its argv is that of staticpod's own hidden commands of the
// same names, which pods started by older versions still run.
//
// Every running copy costs its private memory, so it imports only the standard library,
// golang.org/x/sys/unix, logs and internal/pause; deps_test.go holds it to that list.
// The staticpod binary carries it (package helper) and writes it under its root dir.
package main

import (
	"os"
	"syscall"

	"github.com/staticpod/staticpod/internal/pause"
	"github.com/staticpod/staticpod/logs"
)

// Exit codes, as staticpod's commands use them.
const (
	exitFailed = 1 // the command ran and failed
	exitUsage  = 2 // the command line is wrong
)

const usage = "usage: staticpod-helper logger CONFIG | staticpod-helper pause"

func main() {
	oneProc()
	os.Exit(run(os.Args[1:]))
}

// run runs the command of args and returns the exit code.
func run(args []string) int {
	if len(args) == 0 {
		return report(exitUsage, usage)
	}
	switch cmd, args := args[0], args[1:]; cmd {
	case logs.Command:
		return logger(args)
	case "pause": // internal/pause subscribed to its signals in an init already
		if err := pause.Run(); err != nil {
			return report(exitFailed, "pause: "+err.Error())
		}
		return 0
	default:
		return report(exitUsage, "unknown command "+cmd+"; "+usage)
	}
}

// logger writes a container's output as logs.RunShimLogger does, with the settings of
// its one argument.
func logger(args []string) int {
	if len(args) != 1 {
		return report(exitUsage, "logger: want one CONFIG argument; "+usage)
	}
	cfg, err := logs.ParseConfig(args[0])
	if err != nil {
		return report(exitUsage, "logger: "+err.Error())
	}
	if err := logs.RunShimLogger(cfg); err != nil {
		return report(exitFailed, "logger for container "+os.Getenv("CONTAINER_ID")+": "+err.Error())
	}
	return 0
}

// report writes msg to stderr, where the shim (or containerd) logs it, and returns code.
func report(code int, msg string) int {
	os.Stderr.WriteString("staticpod-helper: " + msg + "\n")
	return code
}

// oneProc starts the program again with GOMAXPROCS=1 unless its environment sets
// GOMAXPROCS. The runtime sizes itself (its Ps, the threads it wakes) for GOMAXPROCS
// before main runs, and a later runtime.GOMAXPROCS(1) gives none of that back; a log
// writer copies two pipes and a sandbox waits for signals, so one P is plenty. Measured
// with 20 log writers on 2 CPUs: 0.72 MiB PSS each instead of 0.88, and 1.1 MiB with
// GOMAXPROCS=16. The exec keeps the PID and the descriptors the shim passed; it runs
// the program by its path, not /proc/self/exe, so that ps names it as before. Should it
// fail, the program runs on as it is. A signal that comes before the exec is lost with
// the first runtime, as one that comes while a runtime starts can be anyway (see
// internal/pause); a sandbox stopped that early is killed at the end of its grace.
func oneProc() {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	if self, err := os.Executable(); err == nil {
		syscall.Exec(self, os.Args, append(os.Environ(), "GOMAXPROCS=1"))
	}
}
