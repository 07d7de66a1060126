package bench

import (
	"os"
	"os/exec"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// allRunning reports whether list holds want pods, every one running with every
// container running.
func allRunning(list []corev1.Pod, want int) bool {
	if len(list) != want {
		return false
	}
	for _, p := range list {
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil {
				return false
			}
		}
	}
	return true
}

// cpuModel is the first processor's model name.
func cpuModel() string {
	return procField("/proc/cpuinfo", "model name")
}

// memTotal is the machine's memory.
func memTotal() string {
	return procField("/proc/meminfo", "MemTotal")
}

// procField is the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	data, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// kernel is the running kernel's release.
func kernel() string {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(data))
}

// cgroupMode tells the unified hierarchy (v2) from v1 or hybrid.
func cgroupMode() string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "v2 (unified)"
	}
	if _, err := os.Stat("/sys/fs/cgroup/unified"); err == nil {
		return "v1 (hybrid)"
	}
	return "v1"
}

// command runs a command and returns its output, or the error's text.
func command(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return err.Error()
	}
	return string(out)
}
