package containerdrt

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// A container's status is read from containerd alone: from the labels staticpod
// wrote on its record (labels.go: who it is, when it started, how its exit was
// recorded) and from its task while it has one. This file is that reading, from a
// record and a task to a runner.Container; List (list.go) says which record and task.

// The pod's UID (LabelPodUID) names its directory, log directory and cgroup, which
// staticpod removes with the pod: a container whose UID label is not a plain token
// (manifests.CheckUID) is not staticpod's, whatever its other labels say. List leaves
// it out, so that no path is ever built from it, and warns once.

// podUIDOf is the pod UID of a container's labels, or an error when it is not a plain
// token.
func podUIDOf(labels map[string]string) (types.UID, error) {
	uid := types.UID(labels[LabelPodUID])
	if err := manifests.CheckUID(uid); err != nil {
		return "", fmt.Errorf("label %s: %w", LabelPodUID, err)
	}
	return uid, nil
}

// forgedUIDs remembers the containers List ignored for their UID label, so that each is
// warned about once, not at every relist.
type forgedUIDs struct {
	mu   sync.Mutex      // guards seen
	seen map[string]bool // container IDs
}

// warn logs, the first time it meets container id, that it is ignored for err.
func (f *forgedUIDs) warn(log *slog.Logger, id string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen[id] {
		return
	}
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	f.seen[id] = true
	log.Warn("container ignored: its pod UID label is not one staticpod gives; nothing of it is touched", "id", id, "err", err)
}

// container is toContainer with the log path checked (logPathOf).
func (r *Runtime) container(info containers.Container, proc *task.Process) (runner.Container, error) {
	c, err := toContainer(info, proc)
	c.LogPath = r.logPathOf(info.Labels)
	return c, err
}

// toContainer reads a container's state from containerd's records: from its task while
// it has one, else from the exit recorded in its labels. Its LogPath is the caller's to
// set (logPathOf).
func toContainer(info containers.Container, proc *task.Process) (runner.Container, error) {
	c := runner.Container{ID: info.ID, Image: info.Image, CreatedAt: info.CreatedAt, State: runner.StateCreated}
	if err := fromLabels(&c, info.Labels); err != nil {
		return c, err
	}
	c.ImageRef = info.Labels[labelImageID]
	c.StartedAt = parseTime(info.Labels[labelStartedAt])
	switch {
	case proc != nil:
		c.PID = proc.Pid
		c.State = taskState(proc.Status)
		if c.State == runner.StateExited {
			c.ExitCode = int32(proc.ExitStatus)
			c.FinishedAt = proc.ExitedAt.AsTime()
			c.Reason = exitReason(c.ExitCode, false)
		}
	case info.Labels[labelPinned] != "" && info.Labels[labelFinishedAt] == "":
		c.State = runner.StateRunning // a pinned sandbox, for as long as its pins hold
	case info.Labels[labelMessagePending] != "":
		// The exit is recorded but its message is not yet: the terminated state is
		// reported once, whole, so until then the container's state is not known.
		c.State = runner.StateUnknown
	case info.Labels[labelFinishedAt] != "":
		c.State = runner.StateExited
		code, _ := strconv.Atoi(info.Labels[labelExitCode])
		c.ExitCode = int32(code)
		c.FinishedAt = parseTime(info.Labels[labelFinishedAt])
		c.Reason = info.Labels[labelReason]
		c.Message = info.Labels[labelMessage]
	}
	return c, nil
}

// fromLabels fills the identity of c from its labels. It fails for containers that are
// not staticpod's (no kind label).
func fromLabels(c *runner.Container, labels map[string]string) error {
	kind := runner.Kind(labels[LabelKind])
	if kind != runner.KindSandbox && kind != runner.KindContainer {
		return fmt.Errorf("container %s has no %s label", c.ID, LabelKind)
	}
	c.Kind = kind
	uid, err := podUIDOf(labels)
	if err != nil {
		return fmt.Errorf("container %s: %w", c.ID, err)
	}
	c.PodUID = uid
	c.PodName = labels[LabelPodName]
	c.PodNamespace = labels[LabelPodNamespace]
	c.Name = labels[LabelContainer]
	if n, err := strconv.Atoi(labels[LabelAttempt]); err == nil && n >= 0 {
		c.Attempt = n // a restart count; anything else reads as a first attempt
	}
	c.Hash = labels[LabelHash]
	c.Source = labels[LabelSource]
	c.Location = labels[LabelPodLocation]
	if secs, err := strconv.ParseInt(labels[LabelPodGrace], 10, 64); err == nil && secs >= 0 && secs <= maxGraceSeconds {
		grace := time.Duration(secs) * time.Second
		c.PodGrace = &grace
	}
	if data := labels[LabelPreStop]; data != "" {
		var spec corev1.Container
		if json.Unmarshal([]byte(data), &spec) == nil {
			c.PreStop = &spec
		}
	}
	c.StopDeadline = parseTime(labels[labelStopDeadline])
	c.PodStart = runner.Timestamp(labels[LabelPodStartTime]) // read when needed (podStart): a List parses no time for it
	if kind == runner.KindSandbox {
		networkFromLabels(c, labels)
	}
	return nil
}

// networkFromLabels reads a sandbox's pod network from its labels.
func networkFromLabels(c *runner.Container, labels map[string]string) {
	for _, ip := range strings.Split(labels[labelPodIPs], ",") {
		if net.ParseIP(ip) != nil {
			c.IPs = append(c.IPs, ip)
		}
	}
	c.NetworkNote = labels[labelNetworkNote]
}

func taskState(s task.Status) runner.State {
	switch s {
	case task.Status_CREATED:
		return runner.StateCreated
	case task.Status_RUNNING, task.Status_PAUSED, task.Status_PAUSING:
		return runner.StateRunning
	case task.Status_STOPPED:
		return runner.StateExited
	}
	return runner.StateUnknown
}

// exitReason is the kubelet's reason for a terminated container.
func exitReason(code int32, oomKilled bool) string {
	switch {
	case oomKilled:
		return "OOMKilled"
	case code == 0:
		return "Completed"
	}
	return "Error"
}

// parseTime reads a time label: zero when absent or not a time. An absent label, the
// common case (a stop deadline, a start not yet recorded), is not parsed: the failed
// parse would allocate an error for every container at every List.
func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}
