package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/staticpod/staticpod/internal/proc"
	"github.com/staticpod/staticpod/internal/testenv"
)

// CPUMeter accounts the CPU time that starting pods costs, by who spends it. containerd
// and the staticpod daemon each run in a CPU-accounting cgroup of the meter's, so that
// what they start inherits it: containerd's shims, the shims' runc calls and log
// writers (which exit or live on), the daemon's helpers. The cgroup counts the time of
// every process that ran in it in nanoseconds, the exited ones included, which
// /proc/<pid>/stat's ticks of the live ones cannot: a runc call is over in a few
// milliseconds.
type CPUMeter struct {
	dir string // the meter's cgroup: containerd/ and daemon/ below it
	v2  bool   // cpu.stat's usage_usec, else cgroup v1's cpuacct.usage
}

// The meter's cgroups.
const (
	cpuContainerd = "containerd"
	cpuDaemon     = "daemon"
)

// NewCPUMeter makes the meter's cgroups and moves the containerd with PID containerd
// into its own.
func NewCPUMeter(containerd int) (*CPUMeter, error) {
	m := &CPUMeter{dir: "/sys/fs/cgroup/cpuacct"}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		m.dir, m.v2 = "/sys/fs/cgroup", true
	}
	m.dir = filepath.Join(m.dir, fmt.Sprintf("staticpod-bench-%d", os.Getpid()))
	for _, g := range []string{cpuContainerd, cpuDaemon} {
		if err := os.MkdirAll(filepath.Join(m.dir, g), 0o755); err != nil {
			return nil, fmt.Errorf("cpu meter: %w", err)
		}
	}
	if err := m.Enter(cpuContainerd, containerd); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Enter moves the process pid into the meter's cgroup group.
func (m *CPUMeter) Enter(group string, pid int) error {
	err := os.WriteFile(filepath.Join(m.dir, group, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
	if err != nil {
		return fmt.Errorf("cpu meter: move %d into %s: %w", pid, group, err)
	}
	return nil
}

// usage is the CPU time spent in group since it was made.
func (m *CPUMeter) usage(group string) (time.Duration, error) {
	if !m.v2 {
		b, err := os.ReadFile(filepath.Join(m.dir, group, "cpuacct.usage"))
		if err != nil {
			return 0, err
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(ns), err
	}
	b, err := os.ReadFile(filepath.Join(m.dir, group, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("%s: no usage_usec", filepath.Join(m.dir, group, "cpu.stat"))
}

// Close moves what is left in the meter's cgroups to the root cgroup and removes them.
func (m *CPUMeter) Close() error {
	var errs []error
	for _, g := range []string{cpuContainerd, cpuDaemon} {
		dir := filepath.Join(m.dir, g)
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for pid := range strings.FieldsSeq(string(b)) {
			// A process that exits meanwhile cannot be moved, and need not be.
			_ = os.WriteFile(filepath.Join(filepath.Dir(m.dir), "cgroup.procs"), []byte(pid), 0o644)
		}
		errs = append(errs, os.Remove(dir))
	}
	errs = append(errs, os.Remove(m.dir))
	return errors.Join(errs...)
}

// CPUUse is the CPU time a piece of work cost, by who spent it.
type CPUUse struct {
	Daemon     time.Duration // the staticpod daemon and its helpers
	Client     time.Duration // the benchmark's own process: the client of the floor
	Containerd time.Duration // containerd itself
	Shims      time.Duration // the shims, their runc calls and whatever else containerd started, but the log writers
	Loggers    time.Duration // the log writers
}

// Total is all of it.
func (u CPUUse) Total() time.Duration {
	return u.Daemon + u.Client + u.Containerd + u.Shims + u.Loggers
}

// CPUMark is what Since needs of the moment it counts from.
type CPUMark struct {
	containerd, daemon, client, containerdSelf time.Duration
	loggers                                    map[int]time.Duration
}

// Mark notes the CPU time spent so far, for Since. containerd is its PID.
func (m *CPUMeter) Mark(containerd int) (CPUMark, error) {
	var k CPUMark
	var err error
	if k.containerd, err = m.usage(cpuContainerd); err != nil {
		return k, err
	}
	if k.daemon, err = m.usage(cpuDaemon); err != nil {
		return k, err
	}
	k.client = selfCPU()
	k.containerdSelf = processCPU(containerd)
	k.loggers = loggerCPU()
	return k, nil
}

// Since is the CPU time spent since mark. A logger's time is its own (the processes
// started as "logger" by a shim), the shims' the rest of containerd's cgroup.
func (m *CPUMeter) Since(k CPUMark, containerd int) (CPUUse, error) {
	now, err := m.Mark(containerd)
	if err != nil {
		return CPUUse{}, err
	}
	var loggers time.Duration
	for pid, t := range now.loggers {
		loggers += t - k.loggers[pid]
	}
	u := CPUUse{
		Daemon:     now.daemon - k.daemon,
		Client:     now.client - k.client,
		Containerd: now.containerdSelf - k.containerdSelf,
		Loggers:    loggers,
	}
	u.Shims = now.containerd - k.containerd - u.Containerd - u.Loggers
	return u, nil
}

// selfCPU is the user and system time of the benchmark's process.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the time every live thread of pid has run (0 once it has exited).
func processCPU(pid int) time.Duration {
	d, _ := proc.RunTime(proc.Root, pid)
	return d
}

// loggerCPU is the CPU time of each live log writer, by PID.
func loggerCPU() map[int]time.Duration {
	out := map[int]time.Duration{}
	procs, err := testenv.Processes()
	if err != nil {
		return out
	}
	for _, p := range procs {
		if helperRole(p) == "logger" {
			out[p.PID] = processCPU(p.PID)
		}
	}
	return out
}

// settle is how long a burst's CPU time is counted past its last start: one relist
// period, in which staticpod sees what it started and tells its status.
const settle = relistPeriod

// Parts is the use by who spent it, and in all ("all"), by name.
func (u CPUUse) Parts() map[string]time.Duration {
	return map[string]time.Duration{
		"all": u.Total(), "replayed": u.Total() - u.Daemon, "daemon": u.Daemon, "client": u.Client,
		"containerd": u.Containerd, "shims": u.Shims, "loggers": u.Loggers,
	}
}
