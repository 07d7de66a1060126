package containerdrt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/logs"

	"github.com/staticpod/staticpod/runner"
)

// maxTerminationMessage is how much of a termination-message file is read, as on the
// kubelet.
const maxTerminationMessage = 4096

// List returns every staticpod sandbox and container in the namespace with its state,
// in two round trips to containerd (containers, then tasks) whatever their number; the
// first is left out while the container records cannot have changed (see records).
//
// List also reaps: a task that has exited has its exit (code, time, reason, termination
// message) recorded in its container's labels and is then deleted, so that an exited
// container costs no shim process and its exit is still known after a restart of
// staticpod or of containerd. If reaping fails, the container is reported from its task
// as it is, and the next List tries again.
func (r *Runtime) List(ctx context.Context) ([]runner.Container, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	infos, err := r.records.list(ctx, r.client.ContainerService(), r.cfg.Observe)
	if err != nil {
		r.lost.watch() // containerd may lose track of shims as it restarts
		return nil, fmt.Errorf("list containers: %w", convertErr(err))
	}
	if !r.cfg.Observe {
		r.sweep.Do(func() {
			r.sweepCreations(ctx, infos, r.started)
			r.sweepPodData(infos)
		})
	}
	resp, err := r.client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		r.lost.watch()
		return nil, fmt.Errorf("list tasks: %w", convertErr(err))
	}
	procs := make(map[string]*task.Process, len(resp.Tasks))
	for _, p := range resp.Tasks {
		procs[taskContainer(p)] = p
	}
	type seen struct {
		info containers.Container
		proc *task.Process
	}
	all := make([]seen, 0, len(infos))
	records := make(map[string]bool, len(infos)) // everything's in the namespace, ours or not
	for _, info := range infos {
		records[info.ID] = true
		if _, ours := info.Labels[LabelKind]; !ours {
			continue
		}
		if _, err := podUIDOf(info.Labels); err != nil {
			r.forged.warn(r.log, info.ID, err)
			continue
		}
		proc := procs[info.ID]
		if !r.cfg.Observe {
			info, proc = r.settle(ctx, info, proc)
		}
		all = append(all, seen{info, proc})
	}
	if !r.cfg.Observe {
		infos := make([]containers.Container, len(all))
		for i, s := range all {
			infos[i] = s.info
		}
		r.releaseKeptTasks(ctx, infos, procs)
		r.removeOrphanPins(ctx, infos)
		r.endLostShims(ctx, records, procs)
	}
	out := make([]runner.Container, 0, len(all))
	for _, s := range all {
		c, err := r.container(s.info, s.proc)
		if err != nil {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// settle brings what containerd holds of a container up to date before it is reported:
// a stopped task is reaped, a started container whose task vanished is marked lost, a
// running one whose start was not recorded gets a start time, and a message left
// pending by an interrupted reap is recorded. A failure is logged and the next List
// tries again; meanwhile an exit that is not recorded whole is reported unknown, never
// as an exit that would read differently later.
func (r *Runtime) settle(ctx context.Context, info containers.Container, proc *task.Process) (containers.Container, *task.Process) {
	if r.interruptedNetworkSetup(info) {
		return r.endInterruptedSetup(ctx, info, proc)
	}
	if info.Labels[labelPinned] != "" {
		return r.settlePinned(ctx, info), nil
	}
	if proc != nil && proc.Status == task.Status_STOPPED && info.Labels[labelFinishedAt] != "" && info.Labels[labelMessagePending] == "" &&
		(keepTask(info) || r.deletingTask(info.ID)) {
		return info, nil // reaped, and its task kept for its shim's sake (see keepTask) or being deleted
	}
	if proc == nil && started(info) {
		info, proc = r.missingTask(ctx, info) // a slow shim may answer alone that it stopped
	}
	var err error
	switch {
	case proc != nil && proc.Status == task.Status_STOPPED:
		var gone bool
		if info, gone, err = r.reap(ctx, info, proc); err == nil || gone {
			proc = nil // reaped; or gone with its message pending, which reads as unknown
		} else {
			proc = &task.Process{ID: proc.ID, Pid: proc.Pid, Status: task.Status_UNKNOWN}
		}
	case proc != nil && proc.Status == task.Status_RUNNING && info.Labels[labelStartedAt] == "":
		// Started by a staticpod that stopped before it recorded the start: the time
		// of this sighting is the best left.
		var all map[string]string
		if all, err = r.setLabels(ctx, info.ID, map[string]string{labelStartedAt: time.Now().UTC().Format(time.RFC3339Nano)}); err == nil {
			info.Labels = all
		}
	case proc == nil && info.Labels[labelMessagePending] != "":
		info, err = r.recordLogMessage(ctx, info)
	}
	if err != nil {
		r.log.Warn("record container exit", "id", info.ID, "err", err)
	}
	return info, proc
}

// started reports whether a container was started and has no exit recorded: it should
// have a task.
func started(info containers.Container) bool {
	return info.Labels[labelStartedAt] != "" && info.Labels[labelFinishedAt] == ""
}

// missingTask looks again, alone, for the task of a started container that ListTasks
// did not return. containerd leaves out tasks whose shim does not answer in time (a
// slow disk), and those must not be taken for dead: such a container is reported with
// an UNKNOWN task, which the runner waits on. A task that is really gone (the machine
// rebooted, the shim was killed) is recorded as exited with code 255 and reason
// Unknown, as containerd's CRI does, so its pod restarts it.
func (r *Runtime) missingTask(ctx context.Context, info containers.Container) (containers.Container, *task.Process) {
	resp, err := r.client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: info.ID})
	switch {
	case err == nil:
		return info, resp.Process
	case !errdefs.IsNotFound(convertErr(err)) && ignoreNotFound(convertErr(err)) != nil:
		return info, &task.Process{ID: info.ID, Status: task.Status_UNKNOWN}
	}
	// The task may have been reaped between the two lists: its exit is recorded then.
	if fresh, err := r.client.ContainerService().Get(ctx, info.ID); err == nil && !started(fresh) {
		return fresh, nil
	}
	if n := killOrphans(info); n > 0 {
		r.log.Warn("killed the processes of a container whose shim is gone", "id", info.ID, "processes", n)
	}
	labels, err := r.setLabels(ctx, info.ID, map[string]string{
		labelExitCode:   strconv.Itoa(lostTaskExitCode),
		labelFinishedAt: time.Now().UTC().Format(time.RFC3339Nano),
		labelReason:     "Unknown",
	})
	if err != nil {
		return info, &task.Process{ID: info.ID, Status: task.Status_UNKNOWN}
	}
	info.Labels = labels
	return info, nil
}

// lostTaskExitCode is the exit code of a container whose task vanished, as on the CRI.
const lostTaskExitCode = 255

// taskContainer is the container a task belongs to. containerd 1.6 leaves
// ContainerID empty in ListTasks and names the task (its init process) by the
// container's ID instead.
func taskContainer(p *task.Process) string {
	if p.ContainerID != "" {
		return p.ContainerID
	}
	return p.ID
}

// inspect is List for one container.
func (r *Runtime) inspect(ctx context.Context, id string) (runner.Container, error) {
	info, err := r.client.ContainerService().Get(ctx, id)
	if err != nil {
		return runner.Container{}, fmt.Errorf("inspect %s: %w", id, convertErr(err))
	}
	var proc *task.Process
	resp, err := r.client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: id})
	switch {
	case err == nil:
		proc = resp.Process
	case !errdefs.IsNotFound(convertErr(err)) && ignoreNotFound(convertErr(err)) != nil:
		return runner.Container{}, fmt.Errorf("inspect %s: %w", id, convertErr(err))
	}
	return r.container(info, proc)
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

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// reap records the exit of a stopped task in its container's labels, then deletes the
// task. The OOM kill count is read from the task's cgroup before the delete removes it.
//
// The termination message is read from the container's termination-message file at
// once. Only a failed FallbackToLogsOnError container with no such message needs its
// log's end, and the log is complete only once the task is deleted: the shim holds the
// write ends of the output pipes until then, and on delete closes them and waits for the
// log writer to drain them and exit. Such a container's exit is recorded first with its
// message marked pending, so that neither a crash nor a failed call between the steps
// loses the exit code, and the message follows once the task is gone. A pending
// container is reported as unknown, never as exited without its message.
//
// The task of a container in a pinned sandbox is kept, stopped, when its message is
// known (see keepTask). It returns the container as far as it got, and whether the
// task is gone or kept.
func (r *Runtime) reap(ctx context.Context, info containers.Container, proc *task.Process) (_ containers.Container, gone bool, _ error) {
	code := int32(proc.ExitStatus)
	msg := readTerminationMessage(r.terminationPathOf(info.Labels))
	fromLog := msg == "" && code != 0 && info.Labels[LabelTermPolicy] == string(corev1.TerminationMessageFallbackToLogsOnError)
	labels := map[string]string{
		labelExitCode:   strconv.Itoa(int(code)),
		labelFinishedAt: proc.ExitedAt.AsTime().UTC().Format(time.RFC3339Nano),
		labelReason:     exitReason(code, info.Labels[labelOOMKilled] != "" || oomKilled(info, code)),
		labelMessage:    fitLabel(labelMessage, msg),
	}
	if fromLog {
		labels[labelMessagePending] = "log"
	}
	all, err := r.setLabels(ctx, info.ID, labels)
	if err != nil {
		return info, false, err
	}
	info.Labels = all
	if !fromLog && keepTask(info) {
		return info, true, nil
	}
	if !fromLog {
		// The exit is recorded: the task's deletion (its shim's exit, tens of
		// milliseconds) need not hold up the relist, and with it the restart.
		r.deleteTaskAside(ctx, info.ID)
		return info, true, nil
	}
	if _, err := r.client.TaskService().Delete(ctx, &tasks.DeleteTaskRequest{ContainerID: info.ID}); ignoreNotFound(convertErr(err)) != nil {
		return info, false, convertErr(err)
	}
	info, err = r.recordLogMessage(ctx, info)
	return info, true, err
}

// deleteTaskAside deletes the stopped task of container id in the background, once;
// until it is done, List reports the container as reaped, and StopContainer and
// RemoveContainer wait for it (awaitAside). A delete that fails is tried again by the
// next List's reap. Close waits for the deletes under way.
func (r *Runtime) deleteTaskAside(ctx context.Context, id string) {
	r.asideMu.Lock()
	defer r.asideMu.Unlock()
	if _, ok := r.aside[id]; ok {
		return
	}
	done := make(chan struct{})
	r.aside[id] = done
	r.asideWG.Add(1)
	go func() {
		defer r.asideWG.Done()
		// Once begun, a delete finishes even if List's caller gives up: one cut short
		// leaves the shim, and runc's state, to nobody.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CallTimeout)
		_, err := r.client.TaskService().Delete(dctx, &tasks.DeleteTaskRequest{ContainerID: id})
		cancel()
		if err := ignoreNotFound(convertErr(err)); err != nil {
			r.log.Warn("delete the stopped task of an exited container; the next relist tries again", "id", id, "err", err)
		}
		r.asideMu.Lock()
		delete(r.aside, id)
		r.asideMu.Unlock()
		close(done)
	}()
}

// deletingTask reports whether the task of container id is being deleted aside.
func (r *Runtime) deletingTask(id string) bool {
	r.asideMu.Lock()
	defer r.asideMu.Unlock()
	_, ok := r.aside[id]
	return ok
}

// awaitAside waits until no delete of container id's task runs aside: a stop or a
// removal meeting one would find a task whose shim is going.
func (r *Runtime) awaitAside(ctx context.Context, id string) {
	r.asideMu.Lock()
	done, ok := r.aside[id]
	r.asideMu.Unlock()
	if !ok {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// recordLogMessage records the end of a reaped container's log as its termination
// message. Its task is gone, so its log writer has finished.
func (r *Runtime) recordLogMessage(ctx context.Context, info containers.Container) (containers.Container, error) {
	all, err := r.setLabels(ctx, info.ID, map[string]string{
		labelMessage:        fitLabel(labelMessage, logTail(ctx, r.logPathOf(info.Labels))),
		labelMessagePending: "", // an empty value removes the label
	})
	if err != nil {
		return info, err
	}
	info.Labels = all
	return info, nil
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

// setLabels sets (or, with an empty value, removes) labels of a container and returns
// all of its labels.
func (r *Runtime) setLabels(ctx context.Context, id string, labels map[string]string) (map[string]string, error) {
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return nil, convertErr(err)
	}
	all, err := c.SetLabels(ctx, labels)
	if err != nil {
		return nil, convertErr(err)
	}
	return all, nil
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
	if n, ok := oomKills(dir); ok {
		return n > 0
	}
	base, err := strconv.ParseInt(info.Labels[labelPodOOMKills], 10, 64)
	if code != exitSIGKILL || err != nil {
		return false
	}
	n, ok := oomKills(path.Dir(dir))
	return ok && n > base
}

// exitSIGKILL is the exit code of a process killed by SIGKILL, as the shim reports it.
const exitSIGKILL = 128 + int32(syscall.SIGKILL)

// oomKills is the OOM kill count of the cgroup dir (relative to the hierarchies'
// mount point), and whether it could be read.
func oomKills(dir string) (int64, bool) {
	for _, file := range []string{
		filepath.Join(cgroupRoot, "memory", dir, "memory.oom_control"),
		filepath.Join(cgroupRoot, dir, "memory.events"),
	} {
		if n, ok := readKey(file, "oom_kill"); ok {
			return n, true
		}
	}
	return 0, false
}

// cgroupPath is the container's cgroup, from its spec, relative to a hierarchy's mount
// point (cgroupDir: the systemd driver's slice:prefix:name is expanded).
func cgroupPath(info containers.Container) (string, bool) {
	var spec specs.Spec
	if info.Spec == nil || json.Unmarshal(info.Spec.GetValue(), &spec) != nil || spec.Linux == nil || spec.Linux.CgroupsPath == "" {
		return "", false
	}
	return cgroupDir(spec.Linux.CgroupsPath), true
}

// killOrphans kills what still runs in the cgroup of a container whose task containerd
// has forgotten (its shim died: nobody else will), so that the restart the runner
// plans does not run beside it.
func killOrphans(info containers.Container) int {
	path, ok := cgroupPath(info)
	if !ok {
		return 0
	}
	killed := 0
	for _, file := range []string{
		filepath.Join(cgroupRoot, "pids", path, "cgroup.procs"), // cgroup v1
		filepath.Join(cgroupRoot, path, "cgroup.procs"),         // cgroup v2
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(field); err == nil && pid > 1 && syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		break
	}
	return killed
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
