package bench

import (
	"path/filepath"
	"strings"
	"syscall"

	"github.com/staticpod/staticpod/internal/proc"
	"github.com/staticpod/staticpod/internal/testenv"
)

// Kind is what one of staticpod's processes is.
type Kind string

// The kinds of staticpod's processes on a node. The apps are not among them: they
// are the user's.
const (
	KindDaemon Kind = "daemon"  // staticpod run
	KindShim   Kind = "shims"   // containerd's shims serving staticpod's namespace
	KindPause  Kind = "pause"   // a pod's sandbox process (pods that share a PID namespace)
	KindLogger Kind = "loggers" // a container's log writer
)

// Kinds lists the kinds in the order the report shows them.
var Kinds = []Kind{KindDaemon, KindShim, KindPause, KindLogger}

// Classify picks staticpod's processes out of procs: the daemon with PID daemon (none
// if 0), the shims serving ns for the containerd at address, and the shims' children
// that are staticpod's helpers, told apart by what they are: a binary of staticpod's
// (the helper program it installs, or staticpod itself when built without it) run as
// "pause" or "logger". The shims' other children are the apps.
func Classify(procs []testenv.Process, daemon int, address, ns string) map[int]Kind {
	set := map[int]Kind{}
	if daemon > 0 {
		set[daemon] = KindDaemon
	}
	shims := Shims(procs, address, ns)
	for pid := range shims {
		set[pid] = KindShim
	}
	for _, p := range procs {
		if !shims[p.PPID] {
			continue
		}
		switch helperRole(p) {
		case "pause":
			set[p.PID] = KindPause
		case "logger":
			set[p.PID] = KindLogger
		}
	}
	return set
}

// helperRole is what a process of a binary of staticpod's runs as ("pause",
// "logger"), or "" for any other process.
func helperRole(p testenv.Process) string {
	if len(p.Args) < 2 || !strings.HasPrefix(filepath.Base(p.Args[0]), "staticpod") {
		return ""
	}
	return p.Args[1]
}

// FileID names a file by its device and inode, however it is reached.
type FileID struct{ Dev, Ino uint64 }

// Exe is the file a process runs; ok is false for a kernel thread or a process that
// has exited.
func Exe(pid int) (id FileID, ok bool) {
	fi, err := proc.ExeFile(proc.Root, pid)
	if err != nil {
		return FileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileID{}, false
	}
	return FileID{Dev: uint64(st.Dev), Ino: st.Ino}, true
}

// Sharers counts the processes outside set that run a binary some process of set runs.
// PSS splits a page among the processes that map it, so while they run, set's PSS is
// lower than it is alone by part of its binaries' pages: a second staticpod daemon
// takes half of the first one's binary off its figure.
func Sharers(procs []testenv.Process, set map[int]Kind, exe func(pid int) (FileID, bool)) int {
	ours := map[FileID]bool{}
	for pid := range set {
		if id, ok := exe(pid); ok {
			ours[id] = true
		}
	}
	n := 0
	for _, p := range procs {
		if _, in := set[p.PID]; in {
			continue
		}
		if id, ok := exe(p.PID); ok && ours[id] {
			n++
		}
	}
	return n
}

// Usage is what the processes of one kind cost.
type Usage struct {
	Procs int   `json:"procs"`
	KiB   int64 `json:"kib"`  // PSS, summed
	Anon  int64 `json:"anon"` // of KiB: anonymous pages (heap, stacks)
	File  int64 `json:"file"` // of KiB: file pages (the binary)
}

// Footprint is what staticpod's processes on a node cost, by kind, and how many other
// processes run the same binaries (see Sharers).
type Footprint struct {
	Daemon, Shims, Pause, Loggers Usage
	Sharers                       int
}

// Of is the usage of one kind.
func (f *Footprint) Of(k Kind) *Usage {
	switch k {
	case KindDaemon:
		return &f.Daemon
	case KindShim:
		return &f.Shims
	case KindPause:
		return &f.Pause
	default:
		return &f.Loggers
	}
}

// Total is the PSS of every kind.
func (f Footprint) Total() int64 {
	return f.Daemon.KiB + f.Shims.KiB + f.Pause.KiB + f.Loggers.KiB
}

// Sum adds up the smaps of set by kind. A process whose smaps cannot be read has
// exited meanwhile and is left out.
func Sum(set map[int]Kind, read func(pid int) (proc.Smaps, bool)) Footprint {
	var f Footprint
	for pid, k := range set {
		s, ok := read(pid)
		if !ok {
			continue
		}
		u := f.Of(k)
		u.Procs++
		u.KiB += s.PSS
		u.Anon += s.PSSAnon
		u.File += s.PSSFile
	}
	return f
}

// Measure reads the footprint of the daemon with PID daemon (none if 0) and of the
// shims serving ns for the containerd at address with their helpers (see Classify),
// from each one's /proc/<pid>/smaps_rollup, as a user measures it.
func Measure(daemon int, address, ns string) (Footprint, error) {
	procs, err := Processes()
	if err != nil {
		return Footprint{}, err
	}
	set := Classify(procs, daemon, address, ns)
	f := Sum(set, ReadSmaps)
	f.Sharers = Sharers(procs, set, Exe)
	return f, nil
}
