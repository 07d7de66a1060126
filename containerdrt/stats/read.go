package stats

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Usage is what one cgroup used, read at one time.
type Usage struct {
	CPUNanos        uint64 // cumulative CPU time of every task in it, ns
	MemoryUsage     uint64 // memory charged to it, page cache included
	WorkingSet      uint64 // MemoryUsage less inactive file pages: what the kubelet evicts and OOM-ranks on
	RSS             uint64 // anonymous memory (v1: total_rss; v2: anon)
	PageFaults      uint64
	MajorPageFaults uint64
	PSI             *Pressure // cgroup v2 with PSI only
}

// Pressure is a cgroup's PSI: the share of time tasks stalled on a resource.
type Pressure struct {
	CPU, Memory, IO PSI
}

// PSI is one resource's pressure file: "some" (at least one task stalled) and "full"
// (all of them).
type PSI struct {
	Some, Full PSILine
}

// PSILine is one line of a pressure file: running averages in percent over 10, 60 and
// 300 s, and the total stall time in µs.
type PSILine struct {
	Avg10, Avg60, Avg300 float64
	Total                uint64
}

// ReadV1 reads the cgroup dir (relative to the hierarchies' mount point mount) of a
// cgroup v1 host: cpuacct.usage, memory.usage_in_bytes and memory.stat (the total_
// figures, which count the cgroups below dir).
func ReadV1(mount, dir string) (Usage, error) {
	var u Usage
	cpu, err := readUint(filepath.Join(mount, "cpuacct", dir, "cpuacct.usage"))
	if err != nil {
		return u, err
	}
	memDir := filepath.Join(mount, "memory", dir)
	usage, err := readUint(filepath.Join(memDir, "memory.usage_in_bytes"))
	if err != nil {
		return u, err
	}
	stat, err := readStat(filepath.Join(memDir, "memory.stat"), "total_inactive_file", "total_rss", "total_pgfault", "total_pgmajfault")
	if err != nil {
		return u, err
	}
	u.CPUNanos, u.MemoryUsage = cpu, usage
	u.WorkingSet = workingSet(usage, stat[0])
	u.RSS, u.PageFaults, u.MajorPageFaults = stat[1], stat[2], stat[3]
	return u, nil
}

// ReadV2 reads the cgroup dir (relative to the unified hierarchy's mount point mount)
// of a cgroup v2 host: cpu.stat, memory.current, memory.stat and the pressure files
// when the kernel has PSI.
func ReadV2(mount, dir string) (Usage, error) {
	var u Usage
	path := filepath.Join(mount, dir)
	cpu, err := readStat(filepath.Join(path, "cpu.stat"), "usage_usec")
	if err != nil {
		return u, err
	}
	usage, err := readUint(filepath.Join(path, "memory.current"))
	if err != nil {
		return u, err
	}
	stat, err := readStat(filepath.Join(path, "memory.stat"), "inactive_file", "anon", "pgfault", "pgmajfault")
	if err != nil {
		return u, err
	}
	u.CPUNanos, u.MemoryUsage = cpu[0]*1000, usage
	u.WorkingSet = workingSet(usage, stat[0])
	u.RSS, u.PageFaults, u.MajorPageFaults = stat[1], stat[2], stat[3]
	u.PSI = readPressure(path)
	return u, nil
}

// ReadNodeV2 reads the node's figures on a cgroup v2 host, whose root cgroup has no
// memory.current: CPU from the root's cpu.stat, memory from meminfo (a /proc/meminfo)
// as cAdvisor does for the root: usage is MemTotal less MemFree, and the working set
// that less the inactive file pages.
func ReadNodeV2(mount, meminfo string) (Usage, error) {
	var u Usage
	cpu, err := readStat(filepath.Join(mount, "cpu.stat"), "usage_usec")
	if err != nil {
		return u, err
	}
	mem, err := readMeminfo(meminfo)
	if err != nil {
		return u, err
	}
	u.CPUNanos = cpu[0] * 1000
	u.MemoryUsage = mem["MemTotal"] - min(mem["MemFree"], mem["MemTotal"])
	u.WorkingSet = workingSet(u.MemoryUsage, mem["Inactive(file)"])
	u.RSS = mem["AnonPages"]
	if stat, err := readStat(filepath.Join(mount, "memory.stat"), "pgfault", "pgmajfault"); err == nil {
		u.PageFaults, u.MajorPageFaults = stat[0], stat[1]
	}
	u.PSI = readPressure(mount)
	return u, nil
}

// workingSet is the kubelet's: usage less inactive file pages, 0 rather than negative.
func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile >= usage {
		return 0
	}
	return usage - inactiveFile
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read cgroup file: %w", err)
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read cgroup file %s: %w", path, err)
	}
	return n, nil
}

// readStat reads the values of keys from a file of "key value" lines (a cgroup's
// memory.stat or cpu.stat, /proc/stat), in the order of keys: 0 for a key the file
// lacks or whose value is not a number. The sampler reads one such file for every pod
// and container on every period, so it reads the file whole and keeps only what it
// was asked for.
func readStat(path string, keys ...string) ([]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read cgroup file: %w", err)
	}
	out := make([]uint64, len(keys))
	for line := range bytes.Lines(b) {
		k, v, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			continue
		}
		for i, key := range keys {
			if string(k) == key {
				out[i], _ = strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
				break
			}
		}
	}
	return out, nil
}

// readMeminfo reads /proc/meminfo's "Key:   N kB" lines, in bytes.
func readMeminfo(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read meminfo: %w", err)
	}
	m := map[string]uint64{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		m[k] = n
	}
	if _, ok := m["MemTotal"]; !ok {
		return nil, fmt.Errorf("read meminfo %s: %w", path, errors.New("no MemTotal"))
	}
	return m, nil
}

// readPressure reads the pressure files of a v2 cgroup dir; nil when the kernel has no
// PSI (or it is off: the files are there but cannot be read).
func readPressure(dir string) *Pressure {
	var p Pressure
	for _, r := range []struct {
		file string
		psi  *PSI
	}{{"cpu.pressure", &p.CPU}, {"memory.pressure", &p.Memory}, {"io.pressure", &p.IO}} {
		psi, err := readPSI(filepath.Join(dir, r.file))
		if err != nil {
			return nil
		}
		*r.psi = psi
	}
	return &p
}

// readPSI reads one pressure file:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
func readPSI(path string) (PSI, error) {
	var psi PSI
	b, err := os.ReadFile(path)
	if err != nil {
		return psi, fmt.Errorf("read pressure: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var l *PSILine
		switch f[0] {
		case "some":
			l = &psi.Some
		case "full":
			l = &psi.Full
		default:
			continue
		}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "avg10":
				l.Avg10, err = strconv.ParseFloat(v, 64)
			case "avg60":
				l.Avg60, err = strconv.ParseFloat(v, 64)
			case "avg300":
				l.Avg300, err = strconv.ParseFloat(v, 64)
			case "total":
				l.Total, err = strconv.ParseUint(v, 10, 64)
			}
			if err != nil {
				return psi, fmt.Errorf("read pressure %s: %s: %w", path, kv, err)
			}
		}
	}
	return psi, nil
}
