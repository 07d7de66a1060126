package containerdrt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"

	"github.com/staticpod/staticpod/containerdrt/pins"
	"github.com/staticpod/staticpod/runner"
)

// A pinned sandbox, once its pins are made (package pins), is running for as long as they
// hold: settlePinned records its end when they are lost, stopPinned ends it, and the
// repairs release the tasks kept for its shim and remove the pins of sandboxes
// containerd no longer knows.

// sandboxPins is the pin directory of sandbox id: its namespaces if it is pinned
// namespaces, else the pin of its network namespace if it has a pod network; "" for a
// container.
func (r *Runtime) sandboxPins(id string, labels map[string]string) string {
	if labels[labelPinned] != "" {
		return r.pinsOf(labels)
	}
	if labels[LabelKind] == string(runner.KindSandbox) {
		return r.pinDir(id)
	}
	return ""
}

// pinnedFiles are the namespace files a pinned sandbox holds, from its label; a
// sandbox recorded without it holds at least net and uts.
func pinnedFiles(labels map[string]string) []string {
	if files := labels[labelPinnedFiles]; files != "" {
		return strings.Split(files, ",")
	}
	return []string{pins.Net.File, pins.UTS.File}
}

// settlePinned records that a pinned sandbox ended when its pins no longer hold (the
// machine rebooted, or someone unmounted them): its pod then starts over in a new
// sandbox, as a kubelet's pod does when its sandbox dies.
func (rp *repairer) settlePinned(ctx context.Context, info containers.Container) containers.Container {
	if info.Labels[labelFinishedAt] != "" {
		return info
	}
	rp.rt.pinMu.Lock()
	defer rp.rt.pinMu.Unlock()
	if time.Since(rp.pinsSeen[info.ID]) < pinRecheck {
		return info
	}
	if pins.Held(rp.rt.pinsOf(info.Labels), pinnedFiles(info.Labels)) {
		rp.pinsSeen[info.ID] = time.Now()
		return info
	}
	delete(rp.pinsSeen, info.ID)
	// info may predate a stop that took the pins while this waited for pinMu.
	fresh, err := rp.rt.client.ContainerService().Get(ctx, info.ID)
	switch {
	case isNotFound(err):
		return containers.Container{ID: info.ID} // removed meanwhile: no labels, so the repair leaves it out
	case err != nil:
		return info // the next repair looks again
	case fresh.Labels[labelFinishedAt] != "":
		return fresh
	}
	labels, err := rp.rt.setLabels(ctx, info.ID, map[string]string{
		labelExitCode:   strconv.Itoa(lostTaskExitCode),
		labelFinishedAt: time.Now().UTC().Format(time.RFC3339Nano),
		labelReason:     "Unknown",
	})
	if err != nil {
		if !isNotFound(err) {
			rp.rt.log.Warn("record the end of a sandbox whose namespaces are gone", "id", info.ID, "err", err)
		}
		return info
	}
	rp.rt.log.Warn("the namespaces of a sandbox are gone: its pod starts over in a new one", "id", info.ID, "pins", info.Labels[labelPinned])
	info.Labels = labels
	return info
}

// pinRecheck is how long a sandbox's pins, once seen holding, are taken to hold
// without a look: they go only when staticpod removes them (which it knows), or when
// someone unmounts them by hand, which the repairs notice this much later. Looking at every
// relist cost 0.2 % of a core at 100 pods.
const pinRecheck = 5 * time.Second

// stopPinned ends a pinned sandbox: its pod network is torn down, then its pins go,
// and with them its namespaces once nothing runs in them (the pod's containers are
// stopped first). A teardown that fails leaves the sandbox running, to be stopped
// again: its namespace must hold until its network is gone.
func (r *Runtime) stopPinned(ctx context.Context, id string, labels map[string]string) error {
	released, err := r.releaseNetwork(ctx, id, labels)
	if err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	r.pinMu.Lock()
	defer r.pinMu.Unlock()
	delete(r.repairs.pinsSeen, id)
	if err := pins.Unpin(r.pinsOf(labels)); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	set := map[string]string{}
	if released {
		set[labelNetwork] = "" // an empty value removes the label
	}
	if labels[labelFinishedAt] == "" {
		set[labelExitCode] = "0"
		set[labelFinishedAt] = time.Now().UTC().Format(time.RFC3339Nano)
		set[labelReason] = "Completed"
	}
	if len(set) == 0 {
		return nil
	}
	_, err = r.setLabels(ctx, id, set)
	return ignoreNotFound(err)
}

// keepTask reports whether the task of a container whose exit is recorded stays,
// stopped, instead of being deleted: it does in a pinned sandbox, where nothing else
// holds the pod's shim. containerd's runc shim exits with the last task it serves, and
// a task that joins a group whose shim is exiting fails to start (seen on containerd
// 2.4); so the pod's last task stays until another task of the pod runs
// (releaseKeptTasks), and restarting the only container of a pod starts no shim. A
// stopped task holds no process, only the shim's record of it and its log writer,
// which ends once the task is deleted.
func keepTask(info containers.Container) bool {
	return info.Labels[labelSandbox] != ""
}

// releaseKeptTasks deletes the kept tasks no shim needs any longer: those of pods that
// have another task that is not stopped, and those whose sandbox ended.
func (rp *repairer) releaseKeptTasks(ctx context.Context, infos []containers.Container, procs map[string]*task.Process) {
	kept := func(info containers.Container) bool {
		p := procs[info.ID]
		return keepTask(info) && p != nil && p.Status == task.Status_STOPPED && info.Labels[labelFinishedAt] != ""
	}
	live := map[string]bool{} // sandboxes with a task that is not stopped
	up := map[string]bool{}   // pinned sandboxes that hold
	for _, info := range infos {
		if info.Labels[labelPinned] != "" && info.Labels[labelFinishedAt] == "" {
			up[info.ID] = true
		}
		if p := procs[info.ID]; keepTask(info) && p != nil && p.Status != task.Status_STOPPED {
			live[info.Labels[labelSandbox]] = true
		}
	}
	for _, info := range infos {
		if sb := info.Labels[labelSandbox]; !kept(info) || up[sb] && !live[sb] {
			continue
		}
		// A delete cut short leaves the shim, and runc's state, to nobody: once begun,
		// it finishes even if the repair's caller gives up.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rp.rt.cfg.CallTimeout)
		_, err := rp.rt.client.TaskService().Delete(dctx, &tasks.DeleteTaskRequest{ContainerID: info.ID})
		cancel()
		if err := ignoreNotFound(convertErr(err)); err != nil {
			rp.rt.log.Warn("delete the stopped task of an exited container", "id", info.ID, "err", err)
		}
	}
}

// removeOrphanPins unpins the namespaces of sandboxes containerd no longer knows: left
// by a staticpod killed while it removed a sandbox, or by a loss of containerd's
// records. infos are all of staticpod's containers.
func (rp *repairer) removeOrphanPins(ctx context.Context, infos []containers.Container) {
	for _, dir := range rp.rt.pinDirs() {
		rp.removeOrphanPinsIn(ctx, dir, infos)
	}
}

// removeOrphanPinsIn is removeOrphanPins in one directory of pin directories.
func (rp *repairer) removeOrphanPinsIn(ctx context.Context, dir string, infos []containers.Container) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	known := make(map[string]bool, len(infos))
	for _, info := range infos {
		known[info.ID] = true
	}
	rp.rt.pinMu.Lock()
	defer rp.rt.pinMu.Unlock()
	for _, e := range entries {
		if known[e.Name()] {
			continue
		}
		// Made since infos were listed? A sandbox is recorded before it is pinned, under
		// pinMu, so it is found now.
		if _, err := rp.rt.client.ContainerService().Get(ctx, e.Name()); !isNotFound(err) {
			continue
		}
		if released, err := rp.rt.releaseNetwork(ctx, e.Name(), nil); err != nil {
			rp.rt.log.Warn("tear down the pod network of a sandbox that is gone", "id", e.Name(), "err", err)
			continue // its namespace must hold until its network is gone: the next repair tries again
		} else if released {
			rp.rt.log.Info("tore down the pod network of a sandbox that is gone", "id", e.Name())
		}
		if err := pins.Unpin(filepath.Join(dir, e.Name())); err != nil {
			rp.rt.log.Warn("remove the pinned namespaces of a sandbox that is gone", "id", e.Name(), "err", err)
			continue
		}
		rp.rt.log.Info("removed the pinned namespaces of a sandbox that is gone", "id", e.Name())
	}
}

// namespacesDir is under the run dir (the root dir for sandboxes pinned before the run
// dir held them): one directory of pins per sandbox.
const namespacesDir = "namespaces"

// pinDir is the directory of the pins of sandbox id: in the run dir, or in the root dir
// where a staticpod that pinned them there did.
func (r *Runtime) pinDir(id string) string {
	if old := filepath.Join(r.cfg.RootDir, namespacesDir, id); exists(old) {
		return old
	}
	return filepath.Join(r.cfg.RunDir, namespacesDir, id)
}

// sandboxNamespaces is the directory of the namespace files a container of sb's pod
// joins: the sandbox process's /proc/<pid>/ns, or the pins of a pinned sandbox; "" when
// there is no sandbox.
func (r *Runtime) sandboxNamespaces(sb *runner.Container) string {
	switch {
	case sb == nil:
		return ""
	case sb.PID > 0:
		return fmt.Sprintf("/proc/%d/ns", sb.PID)
	}
	return r.pinDir(sb.ID)
}

// pinDirs are the directories that hold pin directories.
func (r *Runtime) pinDirs() []string {
	return []string{filepath.Join(r.cfg.RunDir, namespacesDir), filepath.Join(r.cfg.RootDir, namespacesDir)}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
