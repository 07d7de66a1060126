package containerdrt

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/logs"
)

// What a container's exit is recorded as (Repair records it in the container's
// labels; List reads it back): its code and time, the kubelet's reason (OOMKilled from
// the cgroup's counts or the shim's event), the termination message from its file, or
// for FallbackToLogsOnError the end of its log, each cut to what a label holds.

// maxTerminationMessage is how much of a termination-message file is read, as on the
// kubelet.
const maxTerminationMessage = 4096

// readExit reads what the exit of a stopped task is to be recorded as in its
// container's labels (see reap): its code, time and reason, and the message the
// container wrote to its termination-message file. The OOM kill count is read from
// the task's cgroup while the task holds it. Only a failed FallbackToLogsOnError
// container with no such message needs its log's end, which is complete only once the
// task is deleted: its message is marked pending, and it reads unknown until then.
func (r *Runtime) readExit(info containers.Container, proc *task.Process) map[string]string {
	code := int32(proc.ExitStatus)
	msg := readTerminationMessage(r.terminationPathOf(info.Labels))
	exit := map[string]string{
		labelExitCode:   strconv.Itoa(int(code)),
		labelFinishedAt: proc.ExitedAt.AsTime().UTC().Format(time.RFC3339Nano),
		labelReason:     exitReason(code, info.Labels[labelOOMKilled] != "" || oomKilled(info, code)),
		labelMessage:    fitLabel(labelMessage, msg),
	}
	if msg == "" && code != 0 && info.Labels[LabelTermPolicy] == string(corev1.TerminationMessageFallbackToLogsOnError) {
		exit[labelMessagePending] = "log"
	}
	return exit
}

// fitLabel makes value fit in a containerd label named key: valid UTF-8 (gRPC refuses
// anything else) and cut, at a character's start, to what containerd keeps in a label.
// A termination message of the kubelet's 4096 bytes, or of bytes that are not text,
// would otherwise make recording the exit fail at every try.
func fitLabel(key, value string) string {
	value = strings.ToValidUTF8(value, "\uFFFD")
	n := maxLabelSize - len(key)
	if len(value) <= n {
		return value
	}
	for n > 0 && !utf8.RuneStart(value[n]) {
		n--
	}
	return value[:n]
}

// oomKilled reports whether the kernel's OOM killer killed a process of the
// container's cgroup (cgroup v1 memory.oom_control or v2 memory.events), while the
// cgroup is there. systemd removes a scope as soon as it is empty, often before a
// relist reaps the exit: then a container killed by SIGKILL (code 137) was OOM-killed
// when its pod's cgroup, which stays, counts more OOM kills than when it was created
// (labelPodOOMKills; the count takes in the pod's every container). recordOOM's label,
// from the shim's event, is the third way.
func oomKilled(info containers.Container, code int32) bool {
	dir, ok := cgroupPath(info)
	if !ok {
		return false
	}
	if n, ok := cgroups.OOMKills(dir); ok {
		return n > 0
	}
	base, err := strconv.ParseInt(info.Labels[labelPodOOMKills], 10, 64)
	if code != exitSIGKILL || err != nil {
		return false
	}
	n, ok := cgroups.OOMKills(path.Dir(dir))
	return ok && n > base
}

// exitSIGKILL is the exit code of a process killed by SIGKILL, as the shim reports it.
const exitSIGKILL = 128 + int32(syscall.SIGKILL)

// cgroupPath is the container's cgroup, from its spec, relative to a hierarchy's mount
// point (cgroups.Dir: the systemd driver's slice:prefix:name is expanded).
func cgroupPath(info containers.Container) (string, bool) {
	var spec specs.Spec
	if info.Spec == nil || json.Unmarshal(info.Spec.GetValue(), &spec) != nil || spec.Linux == nil || spec.Linux.CgroupsPath == "" {
		return "", false
	}
	return cgroups.Dir(spec.Linux.CgroupsPath), true
}

// Of a failed container's log, what FallbackToLogsOnError reports, as on the kubelet.
const (
	fallbackLines = 80
	fallbackBytes = 2048
)

// logTail is the end of a container's log: its last 80 lines, at most 2048 bytes.
func logTail(ctx context.Context, path string) string {
	if path == "" {
		return ""
	}
	var b bytes.Buffer
	if err := logs.Read(ctx, path, logs.ReadOptions{Tail: fallbackLines}, &b); err != nil {
		return ""
	}
	out := b.Bytes()
	if len(out) > fallbackBytes {
		out = out[len(out)-fallbackBytes:]
	}
	return string(out)
}

// readTerminationMessage reads the first maxTerminationMessage bytes the container
// wrote to its termination-message file.
func readTerminationMessage(path string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxTerminationMessage))
	return string(b)
}
