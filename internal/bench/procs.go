package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/internal/testenv"
)

// statFields are the fields of /proc/<pid>/stat after the command name, which is in
// parentheses and may hold spaces: fields[0] is the state (field 3 of proc(5)).
func statFields(pid int) ([]string, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])), nil
}

// CPUTicks is the user and system time a process has used, in clock ticks
// (USER_HZ, 100 a second on Linux).
func CPUTicks(pid int) (int64, error) {
	fields, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, fields[11], fields[12])
	}
	return utime + stime, nil
}

// ticksPerSecond is USER_HZ, which Linux fixes at 100 for user space.
const ticksPerSecond = 100

// Smaps is what /proc/<pid>/smaps_rollup sums over a process's mappings, in KiB. PSS
// divides each page among the processes that map it: a binary's file pages cost a
// process less while another process runs the same binary.
type Smaps struct {
	RSS, PSS         int64
	PSSAnon, PSSFile int64 // of PSS: anonymous pages (heap, stacks) and file pages (the binary)
}

// ParseSmapsRollup reads the "Key: <n> kB" lines of an smaps_rollup file. It fails
// when there is no Pss line: that is no smaps_rollup.
func ParseSmapsRollup(r io.Reader) (Smaps, error) {
	var s Smaps
	fields := map[string]*int64{"Rss:": &s.RSS, "Pss:": &s.PSS, "Pss_Anon:": &s.PSSAnon, "Pss_File:": &s.PSSFile}
	seen := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		dst, ok := fields[f[0]]
		if !ok {
			continue
		}
		kib, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || (len(f) > 2 && f[2] != "kB") {
			return Smaps{}, fmt.Errorf("smaps_rollup: %q: not a size in kB", sc.Text())
		}
		*dst = kib
		seen = seen || f[0] == "Pss:"
	}
	if err := sc.Err(); err != nil {
		return Smaps{}, fmt.Errorf("smaps_rollup: %w", err)
	}
	if !seen {
		return Smaps{}, errors.New("smaps_rollup: no Pss line")
	}
	return s, nil
}

// ReadSmaps reads a process's smaps_rollup; ok is false once it has exited.
func ReadSmaps(pid int) (s Smaps, ok bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return Smaps{}, false
	}
	defer f.Close()
	s, err = ParseSmapsRollup(f)
	return s, err == nil
}

// PSS returns a process's proportional set size in KiB; ok is false once it has exited.
func PSS(pid int) (kib int64, ok bool) {
	s, ok := ReadSmaps(pid)
	return s.PSS, ok
}

// RSS returns a process's resident set size in KiB; ok is false once it has exited.
func RSS(pid int) (kib int64, ok bool) {
	return procValue(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
}

// procValue reads the "<key> <n> kB" line of a /proc file.
func procValue(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, found := strings.CutPrefix(s.Text(), key); found {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kib, err == nil
		}
	}
	return 0, false
}

// Processes lists the live processes with their parents and arguments.
func Processes() ([]testenv.Process, error) { return testenv.Processes() }

// Shims returns the processes among procs that are containerd shims serving namespace
// ns for the containerd at address (their -address names the same socket, however
// either is spelled: see containerdrt.SameSocket). containerd also runs the shim's
// binary for a moment to start a task or clean up after one, with the action ("start",
// "delete") as the last argument; those are not shims that serve.
func Shims(procs []testenv.Process, address, ns string) map[int]bool {
	shims := map[int]bool{}
	for _, p := range procs {
		if len(p.Args) == 0 || !strings.HasPrefix(filepath.Base(p.Args[0]), "containerd-shim") {
			continue
		}
		if action := p.Args[len(p.Args)-1]; action == "start" || action == "delete" {
			continue
		}
		if flagValue(p.Args, "namespace") == ns && containerdrt.SameSocket(flagValue(p.Args, "address"), address) {
			shims[p.PID] = true
		}
	}
	return shims
}

// flagValue returns the value of the flag -name or --name, given as a separate argument.
func flagValue(args []string, name string) string {
	i := slices.IndexFunc(args, func(a string) bool { return a == "-"+name || a == "--"+name })
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}
