package containerdrt

// A container's task is made from the container's record as the client's NewTask
// makes it, and started; a creation cut short is cleared and tried again.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	apitypes "github.com/containerd/containerd/api/types"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"

	"github.com/staticpod/staticpod/containerdrt/shims"
)

// startTask creates and starts c's task and records when it started (containerd keeps
// no start time of its own). The start is recorded once the task has started: a
// staticpod killed in the middle of a start (containerd then kills or deletes the task
// of the call that went away) leaves a container with no start recorded, which the
// runner makes again under its attempt (see runner's neverStarted). One killed between
// the start and its record leaves a running task, whose start the next relist records.
func (r *Runtime) startTask(ctx context.Context, info containers.Container, ioc cio.Creator) error {
	defer r.repairs.lost.CreatingTask(info.ID)() // the repair leaves its shim and its start time alone
	io, err := r.newTask(ctx, info, ioc)
	if err != nil {
		r.repairs.lost.Watch() // containerd may have left a shim of the failed creation
		return convertErr(err)
	}
	started := time.Now().UTC() // before Start: a short-lived process may exit before Start returns
	if _, err := r.client.TaskService().Start(ctx, &tasks.StartRequest{ContainerID: info.ID}); err != nil {
		io.Cancel()
		io.Close()
		if c, lerr := r.client.LoadContainer(ctx, info.ID); lerr == nil {
			if task, terr := c.Task(ctx, nil); terr == nil {
				if _, derr := task.Delete(ctx, client.WithProcessKill); derr != nil {
					r.log.Warn("delete task that failed to start", "id", info.ID, "err", derr)
				}
			}
		}
		return convertErr(errgrpc.ToNative(err))
	}
	if _, err := r.setLabels(ctx, info.ID, map[string]string{labelStartedAt: started.Format(time.RFC3339Nano)}); err != nil {
		// The container runs: failing its start would have it removed. Repair records
		// a start time for a running task that has none.
		r.log.Warn("record container start", "id", info.ID, "err", err)
	}
	return nil
}

// newTask creates the task of the container with record info, again after clearing
// what a creation cut short left in its way (clearForTask) or runc's state of a
// container whose process is gone, and again after a shim of its group that was
// exiting is gone. It returns the task's IO.
func (r *Runtime) newTask(ctx context.Context, info containers.Container, ioc cio.Creator) (cio.IO, error) {
	io, err := r.createTask(ctx, info, ioc)
	for try := 0; try < 3 && err != nil && ctx.Err() == nil && r.clearForTask(ctx, info.ID, err); try++ {
		io, err = r.createTask(ctx, info, ioc)
	}
	if err != nil && strings.Contains(err.Error(), shims.RuncStateExists) && shims.RemoveStaleRuncState(shims.RuncRoot, r.cfg.Namespace, info.ID) {
		r.log.Warn("removed runc's state of a container whose process is gone", "id", info.ID)
		io, err = r.createTask(ctx, info, ioc)
	}
	for wait := shimExitWait; err != nil && strings.Contains(err.Error(), errShimGone) && wait <= 4*shimExitWait; wait *= 2 {
		// The task joined its group's shim as that shim exited: once it is gone, the
		// next try starts a new one.
		r.log.Info("the shim of the container's group was exiting; trying again", "id", info.ID, "err", err)
		time.Sleep(wait)
		io, err = r.createTask(ctx, info, ioc)
	}
	return io, err
}

// createTask creates the task of the container with record info as the client's
// NewTask does for a container with a snapshot and no task options: NewTask reads the
// record from containerd three times more.
func (r *Runtime) createTask(ctx context.Context, info containers.Container, ioc cio.Creator) (_ cio.IO, err error) {
	io, err := ioc(info.ID)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			io.Cancel()
			io.Close()
		}
	}()
	cfg := io.Config()
	req := &tasks.CreateTaskRequest{ContainerID: info.ID, Terminal: cfg.Terminal, Stdin: cfg.Stdin, Stdout: cfg.Stdout, Stderr: cfg.Stderr}
	if info.SnapshotKey != "" {
		if req.Rootfs, err = r.rootfsMounts(ctx, info); err != nil {
			return nil, err
		}
	}
	if _, err := r.client.TaskService().Create(ctx, req); err != nil {
		return nil, errgrpc.ToNative(err)
	}
	return io, nil
}

// rootfsMounts are the mounts of a container's snapshot, with the SELinux mount label
// of its spec if it has one.
func (r *Runtime) rootfsMounts(ctx context.Context, info containers.Container) ([]*apitypes.Mount, error) {
	if info.Snapshotter == "" {
		return nil, fmt.Errorf("container %s has a snapshot but no snapshotter: %w", info.ID, errdefs.ErrInvalidArgument)
	}
	mounts, err := r.client.SnapshotService(info.Snapshotter).Mounts(ctx, info.SnapshotKey)
	if err != nil {
		return nil, err
	}
	var label string
	if info.Spec != nil && bytes.Contains(info.Spec.GetValue(), []byte(`"mountLabel"`)) {
		var s oci.Spec
		if err := json.Unmarshal(info.Spec.GetValue(), &s); err != nil {
			return nil, fmt.Errorf("spec of container %s: %w", info.ID, err)
		}
		if s.Linux != nil && s.Linux.MountLabel != "" {
			label = fmt.Sprintf("context=%q", s.Linux.MountLabel)
		}
	}
	out := make([]*apitypes.Mount, 0, len(mounts))
	for _, m := range mounts {
		if label != "" {
			m.Options = append(m.Options, label)
		}
		out = append(out, &apitypes.Mount{Type: m.Type, Source: m.Source, Target: m.Target, Options: m.Options})
	}
	return out, nil
}
