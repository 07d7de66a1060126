package containerdrt

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/internal/proc"
)

// repairer mends what List saw: it records the exits of stopped tasks and deletes the
// tasks (aside, see deleteTaskAside), releases the tasks kept for a pinned sandbox's
// shim (releaseKeptTasks), and ends what a crash or a killed process left behind:
// interrupted creations and the data of pods that are gone (once, at the first
// repair), sandboxes whose network setup was interrupted, the processes of containers
// whose shim is gone, sandboxes whose pins were lost, pins of sandboxes containerd
// forgot, and shims containerd lost track of (lostShims, on windows of their own).
//
// It works from the observation the last List kept, and through the Runtime's own
// operations and client (rt); it holds the state of its repairs. List never repairs,
// so a Runtime that only observes (Config.Observe) never calls it.
type repairer struct {
	rt *Runtime

	mu       sync.Mutex           // guards last and failed
	last     *observation         // what the last List saw, not repaired yet
	failed   bool                 // a List failed since the last repair: containerd may be restarting
	sweep    sync.Once            // sweepCreations, sweepPodData and sweepImageVolumes, at the first repair
	pinsSeen map[string]time.Time // sandbox ID -> when its pins were last seen holding (see pinRecheck); guarded by rt.pinMu

	asideMu sync.Mutex               // guards aside
	aside   map[string]chan struct{} // containers whose stopped task is being deleted (deleteTaskAside), to the delete's end
	asideWG sync.WaitGroup           // the deletes under way

	lost *lostShims // shims serving containers containerd lost track of
}

func newRepairer(rt *Runtime) *repairer {
	return &repairer{rt: rt, pinsSeen: map[string]time.Time{}, aside: map[string]chan struct{}{}, lost: newLostShims(proc.Root)}
}

// saw keeps what a List saw for the next repair.
func (rp *repairer) saw(obs *observation) {
	rp.mu.Lock()
	rp.last = obs
	rp.mu.Unlock()
}

// listFailed notes that a List failed: containerd may lose track of shims as it
// restarts, so the next repairs look for lost ones more often (shims.Lost.Watch).
func (rp *repairer) listFailed() {
	rp.mu.Lock()
	rp.failed = true
	rp.mu.Unlock()
}

// Repair mends what the last List saw (see repairer), once: a second call before the
// next List does nothing. It reports whether a container record changed while it ran,
// through this Runtime or as containerd reported (RecordsChanged): then List would
// report differently, and the caller lists again before it acts. A Runtime that only
// observes repairs nothing.
func (r *Runtime) Repair(ctx context.Context) bool {
	if r.cfg.Observe {
		return false
	}
	before := r.records.changes.Load()
	r.repairs.repair(ctx)
	return r.records.changes.Load() != before
}

func (rp *repairer) repair(ctx context.Context) {
	rp.mu.Lock()
	obs, failed := rp.last, rp.failed
	rp.last, rp.failed = nil, false
	rp.mu.Unlock()
	if failed {
		rp.lost.Watch()
	}
	if obs == nil {
		return
	}
	ctx, cancel := rp.rt.call(ctx)
	defer cancel()
	rp.sweep.Do(func() {
		rp.sweepCreations(ctx, obs.infos, rp.rt.started)
		rp.sweepPodData(obs.infos)
		rp.sweepImageVolumes(ctx, obs.infos)
	})
	ours := make([]containers.Container, len(obs.ours))
	for i, s := range obs.ours {
		ours[i] = rp.mend(ctx, s)
	}
	records := make(map[string]bool, len(obs.infos)) // everything's in the namespace, ours or not
	for _, info := range obs.infos {
		records[info.ID] = true
	}
	rp.releaseKeptTasks(ctx, ours, obs.procs)
	rp.removeOrphanPins(ctx, ours)
	rp.endLostShims(ctx, records, obs.procs)
}

// mend brings what containerd holds of one container up to date with what List read
// of it: a sandbox whose network setup was interrupted is stopped, a pinned sandbox
// whose pins are gone is recorded as ended, a lost container has what still runs of it
// killed and its end recorded, a stopped task has its exit recorded and is deleted, a
// running one whose start was not recorded gets a start time, and a message left
// pending by an interrupted reap is recorded. A failure is logged and the next repair
// tries again. It returns the container's record as it left it.
func (rp *repairer) mend(ctx context.Context, s sighting) containers.Container {
	info, proc := s.info, s.proc
	var err error
	switch {
	case s.interrupted:
		rp.endInterruptedSetup(ctx, info)
		return info
	case info.Labels[labelPinned] != "":
		return rp.settlePinned(ctx, info)
	case s.lost:
		info, err = rp.recordLost(ctx, info)
	case s.exit != nil:
		info, err = rp.reap(ctx, info, s.exit)
	case proc != nil && proc.Status == task.Status_STOPPED:
		if !keepTask(info) {
			rp.deleteTaskAside(ctx, info.ID) // its exit is recorded; a delete left undone
		}
	case proc != nil && proc.Status == task.Status_RUNNING && info.Labels[labelStartedAt] == "" && !rp.lost.Creating(info.ID):
		// Started by a staticpod that stopped before it recorded the start: the time
		// of this sighting is the best left. A task being started here is left to
		// startTask, which records its start once it has started (in a burst a relist
		// often lands in between, and would record a later time in another write).
		var all map[string]string
		if all, err = rp.rt.setLabels(ctx, info.ID, map[string]string{labelStartedAt: time.Now().UTC().Format(time.RFC3339Nano)}); err == nil {
			info.Labels = all
		}
	case proc == nil && info.Labels[labelMessagePending] != "":
		info, err = rp.recordLogMessage(ctx, info)
	}
	if err != nil {
		rp.rt.log.Warn("record container exit", "id", info.ID, "err", err)
	}
	return info
}

// recordLost kills what still runs of a started container whose task containerd has
// forgotten (see lookForTask) and records it as exited with code 255 and reason
// Unknown.
func (rp *repairer) recordLost(ctx context.Context, info containers.Container) (containers.Container, error) {
	rp.rt.log.Warn("the task of a started container is gone: recording it as exited (Unknown, 255)",
		"id", info.ID, "started", info.Labels[labelStartedAt], "processes killed", killOrphans(info))
	labels, err := rp.rt.setLabels(ctx, info.ID, map[string]string{
		labelExitCode:   strconv.Itoa(lostTaskExitCode),
		labelFinishedAt: time.Now().UTC().Format(time.RFC3339Nano),
		labelReason:     "Unknown",
	})
	if err != nil {
		return info, err
	}
	info.Labels = labels
	return info, nil
}

// reap records the exit List read of a stopped task (readExit) in its container's
// labels, then deletes the task.
//
// Only a failed FallbackToLogsOnError container with no termination message needs its
// log's end, and the log is complete only once the task is deleted: the shim holds the
// write ends of the output pipes until then, and on delete closes them and waits for the
// log writer to drain them and exit. Such a container's exit is recorded first with its
// message marked pending, so that neither a crash nor a failed call between the steps
// loses the exit code, and the message follows once the task is gone. A pending
// container is reported as unknown, never as exited without its message.
//
// The task of a container in a pinned sandbox is kept, stopped, when its message is
// known (see keepTask). It returns the container as far as it got.
func (rp *repairer) reap(ctx context.Context, info containers.Container, exit map[string]string) (containers.Container, error) {
	fromLog := exit[labelMessagePending] != ""
	all, err := rp.rt.setLabels(ctx, info.ID, exit)
	if err != nil {
		return info, err
	}
	rp.rt.log.Debug("container exited", "id", info.ID, "code", exit[labelExitCode], "reason", exit[labelReason],
		"started", info.Labels[labelStartedAt])
	info.Labels = all
	if !fromLog && keepTask(info) {
		return info, nil
	}
	if !fromLog {
		// The exit is recorded: the task's deletion (its shim's exit, tens of
		// milliseconds) need not hold up the relist, and with it the restart.
		rp.deleteTaskAside(ctx, info.ID)
		return info, nil
	}
	if _, err := rp.rt.client.TaskService().Delete(ctx, &tasks.DeleteTaskRequest{ContainerID: info.ID}); ignoreNotFound(convertErr(err)) != nil {
		return info, convertErr(err)
	}
	return rp.recordLogMessage(ctx, info)
}

// deleteTaskAside deletes the stopped task of container id in the background, once;
// until it is done, StopContainer and RemoveContainer wait for it (awaitAside). A
// delete that fails is tried again by the next repair. Close waits for the deletes
// under way.
func (rp *repairer) deleteTaskAside(ctx context.Context, id string) {
	rp.asideMu.Lock()
	defer rp.asideMu.Unlock()
	if _, ok := rp.aside[id]; ok {
		return
	}
	done := make(chan struct{})
	rp.aside[id] = done
	rp.asideWG.Add(1)
	go func() {
		defer rp.asideWG.Done()
		// Once begun, a delete finishes even if the repair's caller gives up: one cut
		// short leaves the shim, and runc's state, to nobody.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rp.rt.cfg.CallTimeout)
		_, err := rp.rt.client.TaskService().Delete(dctx, &tasks.DeleteTaskRequest{ContainerID: id})
		cancel()
		if err := ignoreNotFound(convertErr(err)); err != nil {
			rp.rt.log.Warn("delete the stopped task of an exited container; the next relist tries again", "id", id, "err", err)
		}
		rp.asideMu.Lock()
		delete(rp.aside, id)
		rp.asideMu.Unlock()
		close(done)
	}()
}

// awaitAside waits until no delete of container id's task runs aside: a stop or a
// removal meeting one would find a task whose shim is going.
func (rp *repairer) awaitAside(ctx context.Context, id string) {
	rp.asideMu.Lock()
	done, ok := rp.aside[id]
	rp.asideMu.Unlock()
	if !ok {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// wait waits for the repairs that go on in the background: the deletes aside (each
// bounded by the call timeout) and the ending of lost shims (bounded by the shims'
// answers and the call timeout).
func (rp *repairer) wait() {
	rp.asideWG.Wait()
	rp.lost.wg.Wait()
}

// recordLogMessage records the end of a reaped container's log as its termination
// message. Its task is gone, so its log writer has finished.
func (rp *repairer) recordLogMessage(ctx context.Context, info containers.Container) (containers.Container, error) {
	all, err := rp.rt.setLabels(ctx, info.ID, map[string]string{
		labelMessage:        fitLabel(labelMessage, logTail(ctx, rp.rt.logPathOf(info.Labels))),
		labelMessagePending: "", // an empty value removes the label
	})
	if err != nil {
		return info, err
	}
	info.Labels = all
	return info, nil
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
		filepath.Join(cgroups.MountPoint, "pids", path, "cgroup.procs"), // cgroup v1
		filepath.Join(cgroups.MountPoint, path, "cgroup.procs"),         // cgroup v2
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
