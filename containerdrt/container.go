package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	"github.com/moby/sys/signal"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/containerdrt/pins"
	"github.com/staticpod/staticpod/containerdrt/poddir"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/logs"
	"github.com/staticpod/staticpod/runner"
)

// killWait bounds the wait for a task to exit after SIGKILL.
const killWait = 10 * time.Second

// errShimGone is how containerd fails a task that joined a group whose shim exited
// under it; shimExitWait is the first wait before trying again.
const (
	errShimGone  = "failed to create TTRPC connection"
	shimExitWait = 50 * time.Millisecond
)

// CreateContainer creates one container of a pod from its image, labelled so that List
// can rebuild it, in the pod directory and cgroup PreparePod made. The pod is read once
// (planContainer: runtime, namespaces, AppArmor profile, devices, labels); then the
// images of the image volumes it mounts are mounted (mountImageVolumes) and the host
// side of the container's own mounts prepared (package poddir), and its spec is built
// from all that (package spec).
func (r *Runtime) CreateContainer(ctx context.Context, req runner.CreateRequest) (runner.Container, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	id := containerID(req.Pod, req.Container.Name, req.Attempt)
	p, err := r.planContainer(req, id)
	if err != nil {
		return runner.Container{}, fmt.Errorf("create container %s: %w", id, err)
	}
	facts, err := r.images.Facts(ctx, req.Image)
	if err != nil {
		return runner.Container{}, fmt.Errorf("create container %s: %w", id, convertErr(err))
	}
	in := p.in
	in.Image = facts.Config.Config
	in.ImageUserFiles = r.images.UserFiles(ctx, req.Image, facts)
	if in.ImageVolumes, err = r.mountImageVolumes(ctx, req, in.PodDir); err != nil {
		return runner.Container{}, fmt.Errorf("create container %s: %w", id, err)
	}
	if in.Prepared, err = poddir.PrepareContainer(in); err != nil {
		return runner.Container{}, fmt.Errorf("create container %s: %w", id, err)
	}
	opts, err := spec.Container(in)
	if err != nil {
		return runner.Container{}, fmt.Errorf("create container %s: %w", id, err)
	}
	opts = append(opts, p.run.spec...)
	labels := p.labels
	labels[client.StopSignalLabel] = spec.StopSignal(in)
	// With the container from the start, so that no listing misses it: a container
	// OOM-killed at once is reaped after the relist its exit wakes (see oomKilled).
	if n, ok := cgroups.OOMKills(p.podCgroup); ok {
		labels[labelPodOOMKills] = strconv.FormatInt(n, 10)
	}
	newOpts := append([]client.NewContainerOpts{client.WithImageName(req.Image.Ref)}, p.run.opts...)
	if r.cfg.Images.Snapshotter != "" {
		newOpts = append(newOpts, client.WithSnapshotter(r.cfg.Images.Snapshotter))
	}
	rootfs := withSnapshotOf(id, facts.ChainID)
	if in.UserNSHostID != 0 || r.cfg.Images.Snapshotter == "" {
		// The client's own way: a remapped snapshot (a copy owned by the pod's IDs
		// where the snapshotter cannot map them), or a snapshotter New could not name.
		img, err := r.client.GetImage(ctx, req.Image.Ref)
		if err != nil {
			return runner.Container{}, fmt.Errorf("create container %s: image %s: %w", id, req.Image.Ref, convertErr(err))
		}
		rootfs = client.WithNewSnapshot(id, img)
		if in.UserNSHostID != 0 {
			rootfs = client.WithRemappedSnapshot(id, img, in.UserNSHostID, in.UserNSHostID)
		}
	}
	newOpts = append(newOpts, rootfs, client.WithNewSpec(opts...), client.WithContainerLabels(labels))
	created, err := r.newContainer(ctx, id, newOpts...)
	if errdefs.IsAlreadyExists(err) {
		// A staticpod that stopped while creating this attempt left its snapshot, or
		// the container, behind: what never started is removed and made anew.
		if err := r.removeUnstarted(ctx, id); err != nil {
			return runner.Container{}, fmt.Errorf("create container %s: %w", id, err)
		}
		created, err = r.newContainer(ctx, id, newOpts...)
	}
	if err != nil {
		return runner.Container{}, fmt.Errorf("create container %s: %w", id, convertErr(err))
	}
	return r.container(created, nil) // as created: no task yet
}

// newContainer creates the record of container id as the client's NewContainer does,
// in a lease of its own (its snapshot may be prepared before the record holds it), but
// with the namespace's runtime New read instead of reading it at each creation.
func (r *Runtime) newContainer(ctx context.Context, id string, opts ...client.NewContainerOpts) (containers.Container, error) {
	if r.defaultRuntime == "" {
		created, err := r.client.NewContainer(ctx, id, opts...)
		if err != nil {
			return containers.Container{}, err
		}
		return created.Info(ctx, client.WithoutRefreshedMetadata)
	}
	ctx, done, err := r.client.WithLease(ctx)
	if err != nil {
		return containers.Container{}, err
	}
	defer done(ctx)
	info := containers.Container{ID: id, Runtime: containers.RuntimeInfo{Name: r.defaultRuntime}}
	for _, o := range opts {
		if err := o(ctx, r.client, &info); err != nil {
			return containers.Container{}, err
		}
	}
	return r.client.ContainerService().Create(ctx, info)
}

// removeUnstarted removes what an interrupted creation of container id left: the
// container (and its task) if it never started, and the snapshot named for it. A
// container that has started is not touched.
func (r *Runtime) removeUnstarted(ctx context.Context, id string) error {
	c, err := r.inspect(ctx, id)
	switch {
	case err == nil && (c.State != runner.StateCreated || !c.StartedAt.IsZero()):
		return fmt.Errorf("container %s exists and has started", id)
	case err == nil:
		if err := r.RemoveContainer(ctx, id); err != nil {
			return err
		}
	case !errors.Is(err, runner.ErrNotFound):
		return err
	}
	err = r.client.SnapshotService(r.cfg.Images.Snapshotter).Remove(ctx, id)
	return ignoreNotFound(convertErr(err))
}

// StartContainer starts a created container, its output going to staticpod's log
// writer run by the shim (so that no pipe depends on this process staying alive).
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	info, ok := r.records.kept(id) // as this Runtime created it, a moment ago
	if !ok {
		c, err := r.client.LoadContainer(ctx, id)
		if err != nil {
			return fmt.Errorf("start container %s: %w", id, convertErr(err))
		}
		info, _ = c.Info(ctx, client.WithoutRefreshedMetadata) // never fails without a refresh
	}
	path := r.logPathOf(info.Labels)
	link := r.logLinkOf(info.Labels, id)
	if err := r.startTask(ctx, info, logCreator(r.cfg.Self, r.cfg.Log, path, link)); err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	return nil
}

// BeginStop records the deadline of a stop that begins, unless one began already.
func (r *Runtime) BeginStop(ctx context.Context, id string, deadline time.Time) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil || loadedLabels(ctx, c)[labelStopDeadline] != "" {
		return ignoreNotFound(convertErr(err))
	}
	_, err = c.SetLabels(ctx, map[string]string{labelStopDeadline: deadline.UTC().Format(time.RFC3339Nano)})
	return ignoreNotFound(convertErr(err))
}

// StopContainer sends the container's stop signal (the image's, else SIGTERM), waits up
// to grace for it to exit, then kills it. A task that is gone or already stopped is no
// error. A pinned sandbox has nothing to signal: its pins go (stopPinned).
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, grace+r.cfg.CallTimeout)
	defer cancel()
	ctx, cancelNS := r.call(ctx)
	defer cancelNS()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return ignoreNotFound(convertErr(err))
	}
	labels := loadedLabels(ctx, c)
	if labels[labelPinned] != "" {
		return r.stopPinned(ctx, id, labels)
	}
	if err := r.stopNetwork(ctx, id, labels); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	r.repairs.awaitAside(ctx, id)
	task, err := c.Task(ctx, nil)
	if err != nil {
		return ignoreNotFound(convertErr(err))
	}
	exited, err := task.Wait(ctx)
	if err != nil {
		return ignoreNotFound(convertErr(err))
	}
	sig := syscall.SIGTERM
	if name := labels[client.StopSignalLabel]; name != "" {
		if s, err := signal.ParseSignal(name); err == nil {
			sig = s
		}
	}
	if grace > 0 {
		gone, err := stop(ctx, task, exited, sig, grace)
		if err != nil {
			return fmt.Errorf("stop container %s: %w", id, err)
		}
		if gone {
			return nil // its shim may be gone with it: nothing is left to kill
		}
	}
	select {
	case <-exited:
		return nil
	default:
	}
	if err := ignoreNotFound(convertErr(task.Kill(ctx, syscall.SIGKILL, client.WithKillAll))); err != nil {
		return fmt.Errorf("kill container %s: %w", id, err)
	}
	select {
	case <-exited:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("kill container %s: still running %v after SIGKILL", id, killWait)
	}
}

// stop signals the task and waits up to grace for it to exit, and reports whether it
// did. exited comes from a Wait taken before the signal, so an exit that races the
// signal is never missed; its value is consumed here.
func stop(ctx context.Context, t client.Task, exited <-chan client.ExitStatus, sig syscall.Signal, grace time.Duration) (gone bool, _ error) {
	if err := ignoreNotFound(convertErr(t.Kill(ctx, sig))); err != nil {
		return false, fmt.Errorf("signal %v: %w", sig, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-exited:
		return true, nil
	case <-timer.C:
		return false, nil // the caller kills
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// RemoveContainer deletes a container, its task, its snapshot, its log files and its
// termination-message file; for a pinned sandbox, its pins. It refuses a container
// whose process runs (refuseRunning); a task created and never started is killed.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return ignoreNotFound(convertErr(err))
	}
	labels := loadedLabels(ctx, c)
	r.repairs.awaitAside(ctx, id)
	unstarted := labels[labelStartedAt] == ""
	if task, err := c.Task(ctx, nil); err == nil {
		st, err := refuseRunning(ctx, task)
		if err != nil {
			return fmt.Errorf("remove container %s: %w", id, err)
		}
		unstarted = unstarted || st == client.Created
		if err := deleteTask(ctx, c, task); err != nil {
			return fmt.Errorf("remove container %s: delete task: %w", id, err)
		}
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, convertErr(err))
	} else {
		unstarted = unstarted || labels[labelFinishedAt] == ""
	}
	if _, err := r.releaseNetwork(ctx, id, labels); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	if err := c.Delete(ctx, client.WithSnapshotCleanup); ignoreNotFound(convertErr(err)) != nil {
		return fmt.Errorf("remove container %s: %w", id, convertErr(err))
	}
	if unstarted {
		// The runner makes a container that never ran again under the same ID, so the
		// same shim socket: a shim an interrupted creation of it left (containerd never
		// connected to it, and it may be stuck) would take the new task and hang it.
		r.repairs.endLostShimsOf(ctx, id)
	}
	if dir := r.sandboxPins(id, labels); dir != "" {
		r.pinMu.Lock()
		delete(r.repairs.pinsSeen, id)
		err := pins.Unpin(dir)
		r.pinMu.Unlock()
		if err != nil {
			return fmt.Errorf("remove sandbox %s: %w", id, err)
		}
	}
	if path := r.logPathOf(labels); path != "" {
		if err := logs.Remove(path, r.logLinkOf(labels, id)); err != nil {
			r.log.Warn("remove container logs", "id", id, "err", err)
		}
	}
	if path := r.terminationPathOf(labels); path != "" {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			r.log.Warn("remove termination message", "id", id, "err", err)
		}
	}
	return nil
}

// refuseRunning fails for a task whose process runs. A container is removed once it is
// stopped, or when it was created and never started; such a one may have started since
// it was seen, by a start its creator sent before it was killed: that container runs,
// and the next relist shows it so (to be kept, or stopped as any other).
// It returns the task's status, "" when it could not be read.
func refuseRunning(ctx context.Context, task client.Task) (client.ProcessStatus, error) {
	st, err := task.Status(ctx)
	if err != nil {
		return "", nil // deleteTask finds out what is left of it
	}
	switch st.Status {
	case client.Running, client.Paused, client.Pausing:
		return st.Status, errStartedSince
	}
	return st.Status, nil
}

var errStartedSince = errors.New("its process runs: it was started since it was seen stopped or never started")

// deleteTask deletes a container's task, killing its process. A task whose shim exits
// as it is deleted (one that was created but never started, say) fails the call in
// words that change with containerd's version (1.6: "task does not exist"; 2.x: "ttrpc:
// closed"); what counts is whether the task is gone, so on an error the task is looked
// up again, and one that containerd no longer has is deleted.
func deleteTask(ctx context.Context, c client.Container, task client.Task) error {
	_, err := task.Delete(ctx, client.WithProcessKill)
	if ignoreNotFound(convertErr(err)) == nil {
		return nil
	}
	if _, lookErr := c.Task(ctx, nil); errdefs.IsNotFound(lookErr) {
		return nil
	}
	return convertErr(err)
}

// RemovePodData deletes the pod's directories (removePodDirs), the views of the images
// of its image volumes, its cgroup and its log directory.
func (r *Runtime) RemovePodData(ctx context.Context, uid types.UID) error {
	if err := r.removePodDirs(uid); err != nil {
		return err
	}
	if err := r.users.Release(string(uid)); err != nil {
		return fmt.Errorf("remove pod data %s: %w", uid, err)
	}
	cctx, cancel := r.call(ctx)
	defer cancel()
	if err := r.removeImageVolumes(cctx, func(u types.UID) bool { return u != uid }); err != nil {
		return fmt.Errorf("remove pod data %s: %w", uid, err)
	}
	if err := r.cgroup.RemovePod(ctx, uid); err != nil {
		return err
	}
	return poddir.RemoveLogs(r.cfg.PodLogDir, uid)
}

// removePodDirs deletes the pod's directories, in the run dir and in the root dir,
// unmounting its /dev/shm, its tmpfs volumes and the images of its image volumes.
func (r *Runtime) removePodDirs(uid types.UID) error {
	dir, err := r.podDir(uid)
	if err != nil {
		return fmt.Errorf("remove pod data: %w", err)
	}
	if err := poddir.Remove(filepath.Join(r.cfg.RunDir, podsDir, string(uid)), dir); err != nil {
		return fmt.Errorf("remove pod data %s: %w", uid, err)
	}
	return nil
}

// loadedLabels are the labels of a container as LoadContainer read them: no second
// round trip to containerd, where every one delays a start or a stop.
func loadedLabels(ctx context.Context, c client.Container) map[string]string {
	info, _ := c.Info(ctx, client.WithoutRefreshedMetadata) // never fails without a refresh
	return info.Labels
}

// withSnapshotOf prepares snapshot id for the container from the unpacked layers of
// an image whose chain ID is parent, in the container's snapshotter, as
// client.WithNewSnapshot does when it is given no remapping: without reading the
// image again, or the snapshotter's capabilities.
func withSnapshotOf(id, parent string) client.NewContainerOpts {
	return func(ctx context.Context, c *client.Client, info *containers.Container) error {
		if _, err := c.SnapshotService(info.Snapshotter).Prepare(ctx, id, parent); err != nil {
			return err
		}
		info.SnapshotKey = id
		return nil
	}
}
