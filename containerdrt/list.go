package containerdrt

import (
	"context"
	"fmt"
	"maps"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"

	"github.com/staticpod/staticpod/runner"
)

// List returns every staticpod sandbox and container in the namespace with its state,
// in two round trips to containerd (containers, then tasks) whatever their number; the
// first is left out while the container records cannot have changed (see records).
//
// List only reads. What it sees that needs mending it reports as Repair will leave
// it, where that can be read: a stopped task whose exit is not recorded yet reads
// exited with the code, reason and message Repair records. What cannot be read before
// it is mended reads unknown, which the runner waits on: a started container whose
// task is gone (its processes may still run), a sandbox whose network setup was
// interrupted, an exit whose message is the end of a log still being written. The last
// List's sight is kept for Repair (see observation).
func (r *Runtime) List(ctx context.Context) ([]runner.Container, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	obs, err := r.observe(ctx)
	if err != nil {
		r.repairs.listFailed()
		return nil, err
	}
	r.repairs.saw(obs)
	out := make([]runner.Container, 0, len(obs.ours))
	for _, s := range obs.ours {
		c, err := r.container(s.view())
		if err != nil {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// observation is what one List read of containerd: what Repair works from.
type observation struct {
	infos []containers.Container   // every record of the namespace, ours or not; read-only
	procs map[string]*task.Process // the tasks ListTasks returned, by container
	ours  []sighting               // staticpod's containers
}

// sighting is what List read of one of staticpod's containers.
type sighting struct {
	info containers.Container // read-only: its labels may be the records cache's
	// proc is its task: from ListTasks, or from a look of its own at a started
	// container that ListTasks left out (see lookForTask); nil when it has none.
	proc *task.Process
	// exit is what its stopped task's exit is to be recorded as, read from the task,
	// the termination-message file and the cgroups (see readExit); nil when its exit
	// is recorded or it has no stopped task.
	exit        map[string]string
	lost        bool // started, and its task is gone: Repair records its end
	interrupted bool // a sandbox whose network setup was interrupted: Repair stops it
}

// observe lists the records and the tasks, and reads what each of staticpod's
// containers holds.
func (r *Runtime) observe(ctx context.Context) (*observation, error) {
	infos, err := r.records.list(ctx, r.client.ContainerService(), r.cfg.Observe)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", convertErr(err))
	}
	resp, err := r.client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", convertErr(err))
	}
	obs := &observation{infos: infos, procs: make(map[string]*task.Process, len(resp.Tasks)), ours: make([]sighting, 0, len(infos))}
	for _, p := range resp.Tasks {
		obs.procs[taskContainer(p)] = p
	}
	for _, info := range infos {
		if _, ours := info.Labels[LabelKind]; !ours {
			continue
		}
		if _, err := podUIDOf(info.Labels); err != nil {
			r.forged.warn(r.log, info.ID, err)
			continue
		}
		obs.ours = append(obs.ours, r.sight(ctx, info, obs.procs[info.ID]))
	}
	return obs, nil
}

// sight reads what a container holds beyond its record and its listed task.
func (r *Runtime) sight(ctx context.Context, info containers.Container, proc *task.Process) sighting {
	if r.interruptedNetworkSetup(info) {
		return sighting{info: info, proc: proc, interrupted: true}
	}
	if info.Labels[labelPinned] != "" {
		return sighting{info: info} // what its labels say; Repair looks at its pins
	}
	s := sighting{info: info, proc: proc}
	if proc == nil && started(info) {
		s = r.lookForTask(ctx, info)
	}
	if s.proc != nil && s.proc.Status == task.Status_STOPPED &&
		(s.info.Labels[labelFinishedAt] == "" || s.info.Labels[labelMessagePending] != "") {
		s.exit = r.readExit(s.info, s.proc)
	}
	return s
}

// view is what List reports of a container it saw: its record and task as Repair will
// leave them where that can be read, unknown where it cannot.
func (s sighting) view() (containers.Container, *task.Process) {
	info, proc := s.info, s.proc
	switch {
	case s.lost || s.interrupted:
		pid := uint32(0)
		if proc != nil {
			pid = proc.Pid
		}
		return info, &task.Process{ID: info.ID, Pid: pid, Status: task.Status_UNKNOWN}
	case s.exit != nil:
		labels := make(map[string]string, len(info.Labels)+len(s.exit))
		maps.Copy(labels, info.Labels)
		maps.Copy(labels, s.exit)
		info.Labels = labels
		return info, nil // an exit whose message is pending reads unknown (toContainer)
	case proc != nil && proc.Status == task.Status_STOPPED:
		return info, nil // its exit is recorded; the task is kept or being deleted
	}
	return info, proc
}

// started reports whether a container was started and has no exit recorded: it should
// have a task.
func started(info containers.Container) bool {
	return info.Labels[labelStartedAt] != "" && info.Labels[labelFinishedAt] == ""
}

// lookForTask looks again, alone, for the task of a started container that ListTasks
// did not return. containerd leaves out tasks whose shim does not answer in time (a
// slow disk), and those must not be taken for dead: such a container is reported with
// an UNKNOWN task, which the runner waits on. A task that is really gone (the machine
// rebooted, the shim was killed) makes the container lost: Repair kills what still
// runs of it and records it as exited with code 255 and reason Unknown, as
// containerd's CRI does, so its pod restarts it.
func (r *Runtime) lookForTask(ctx context.Context, info containers.Container) sighting {
	resp, err := r.client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: info.ID})
	switch {
	case err == nil:
		return sighting{info: info, proc: resp.Process}
	case !errdefs.IsNotFound(convertErr(err)) && ignoreNotFound(convertErr(err)) != nil:
		return sighting{info: info, proc: &task.Process{ID: info.ID, Status: task.Status_UNKNOWN}}
	}
	// The task may have been reaped between the two lists: its exit is recorded then.
	if fresh, err := r.client.ContainerService().Get(ctx, info.ID); err == nil && !started(fresh) {
		return sighting{info: fresh}
	}
	return sighting{info: info, lost: true}
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
