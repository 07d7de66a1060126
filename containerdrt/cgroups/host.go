package cgroups

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// MountPoint is where the host's cgroup filesystem is mounted: the unified hierarchy
// on cgroup v2, a directory of hierarchies on v1.
const MountPoint = "/sys/fs/cgroup"

// unifiedMarker is there on a cgroup v2 host only.
const unifiedMarker = MountPoint + "/cgroup.controllers"

// Unified reports whether the host has cgroup v2 only (MountPoint holds
// cgroup.controllers). It is read once: it does not change while staticpod runs.
func Unified() bool { return unified() }

var unified = sync.OnceValue(func() bool {
	_, err := os.Stat(unifiedMarker)
	return err == nil
})

// OOMKills is the OOM kill count of the cgroup dir (relative to the hierarchies'
// mount point), and whether it could be read.
func OOMKills(dir string) (int64, bool) {
	for _, file := range []string{
		filepath.Join(MountPoint, "memory", dir, "memory.oom_control"),
		filepath.Join(MountPoint, dir, "memory.events"),
	} {
		if n, ok := readKey(file, "oom_kill"); ok {
			return n, true
		}
	}
	return 0, false
}

// populated reports whether a cgroup v2 directory, or one below it, holds a process.
func populated(dir string) bool {
	n, ok := readKey(filepath.Join(dir, "cgroup.events"), "populated")
	return ok && n > 0
}

// readKey reads "key N" from a cgroup file of such lines.
func readKey(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key+" "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
