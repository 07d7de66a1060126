package proc

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Stat is what a process's stat file says of it that staticpod reads.
type Stat struct {
	State        string // R, S, D, Z (a zombie), ...
	PPID         int
	UTime, STime uint64 // CPU time in user and kernel mode, in clock ticks (USER_HZ)
	// StartTime is when the process started, in clock ticks since boot: a PID names
	// one process only while a process of that start time has it.
	StartTime uint64
}

// ReadStat reads process pid's stat file.
func ReadStat(procRoot string, pid int) (Stat, error) {
	data, err := os.ReadFile(Path(procRoot, pid, "stat"))
	if err != nil {
		return Stat{}, err
	}
	s, err := ParseStat(string(data))
	if err != nil {
		return Stat{}, fmt.Errorf("stat of process %d: %w", pid, err)
	}
	return s, nil
}

// ParseStat parses the text of a stat file.
func ParseStat(stat string) (Stat, error) {
	// The command name, in parentheses, may hold anything: the fields follow its end.
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return Stat{}, fmt.Errorf("no command name in %q", stat)
	}
	fields := strings.Fields(stat[end+1:]) // state (the 3rd field of all), ppid, ... starttime (the 22nd)
	if len(fields) < 20 {
		return Stat{}, fmt.Errorf("%d fields after the command name, want 20 or more", len(fields))
	}
	s := Stat{State: fields[0]}
	var errs [4]error
	s.PPID, errs[0] = strconv.Atoi(fields[1])
	s.UTime, errs[1] = strconv.ParseUint(fields[11], 10, 64)
	s.STime, errs[2] = strconv.ParseUint(fields[12], 10, 64)
	s.StartTime, errs[3] = strconv.ParseUint(fields[19], 10, 64)
	for _, err := range errs {
		if err != nil {
			return Stat{}, err
		}
	}
	return s, nil
}

// Status is what a process's status file says of it that staticpod reads.
type Status struct {
	UIDs [4]int // real, effective, saved and filesystem user IDs
	// RSS is the resident set size in KiB (VmRSS), and HasRSS whether the file gives
	// one: a kernel thread's does not.
	RSS    int64
	HasRSS bool
}

// ReadStatus reads process pid's status file. It fails when the file has no Uid line
// of four IDs.
func ReadStatus(procRoot string, pid int) (Status, error) {
	f, err := os.Open(Path(procRoot, pid, "status"))
	if err != nil {
		return Status{}, err
	}
	defer f.Close()
	var s Status
	uids := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, _ := strings.Cut(sc.Text(), ":")
		switch key {
		case "Uid":
			fields := strings.Fields(value)
			if len(fields) != len(s.UIDs) {
				return Status{}, fmt.Errorf("status of process %d: Uid: %q, want four IDs", pid, value)
			}
			for i, f := range fields {
				if s.UIDs[i], err = strconv.Atoi(f); err != nil {
					return Status{}, fmt.Errorf("status of process %d: Uid: %w", pid, err)
				}
			}
			uids = true
		case "VmRSS":
			s.RSS, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			s.HasRSS = err == nil
		}
	}
	if err := sc.Err(); err != nil {
		return Status{}, fmt.Errorf("status of process %d: %w", pid, err)
	}
	if !uids {
		return Status{}, fmt.Errorf("status of process %d: no Uid line", pid)
	}
	return s, nil
}

// RunTime is how long every live thread of process pid has run, from the scheduler's
// statistics (the first field of each thread's schedstat, in nanoseconds): finer than
// Stat's clock ticks, for a process that has run a few milliseconds.
func RunTime(procRoot string, pid int) (time.Duration, error) {
	threads, err := os.ReadDir(Path(procRoot, pid, "task"))
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range threads {
		data, err := os.ReadFile(Path(procRoot, pid, "task", t.Name(), "schedstat"))
		if err != nil {
			continue // a thread that ended meanwhile
		}
		f := strings.Fields(string(data))
		if len(f) == 0 {
			return 0, fmt.Errorf("schedstat of thread %s of process %d: empty", t.Name(), pid)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("schedstat of thread %s of process %d: %w", t.Name(), pid, err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}
