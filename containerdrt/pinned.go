package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	"golang.org/x/sys/unix"

	"github.com/staticpod/staticpod/internal/pause"
	"github.com/staticpod/staticpod/runner"
)

// A pod with its own network needs no process to hold its namespaces: they are pinned
// as files, bind mounts of the namespaces' nsfs entries under the root dir, as
// containerd's CRI pins a pod's network namespace and `ip netns add` does. The pod's
// containers join them by path. A namespace lives as long as a mount of it, a process
// in it or an open descriptor to it, so the pod's namespaces outlive restarts of all of
// its containers and of staticpod, and go when the pins are unmounted (unpinNamespaces)
// once nothing runs in them. Only a pod that shares one PID namespace between its
// containers still has a sandbox process: a PID namespace needs an init.

// namespacesDir is under the root dir: one directory of pins per sandbox.
const namespacesDir = "namespaces"

// nsfsMagic is the file system type statfs reports for a namespace file.
const nsfsMagic = 0x6e736673

// pinnedNamespace is one namespace a pinned sandbox can hold: the name of its file
// under /proc/<pid>/ns (and in the sandbox's pin directory) and its clone flag.
type pinnedNamespace struct {
	file string
	flag int
}

var (
	pinNet = pinnedNamespace{"net", unix.CLONE_NEWNET}
	pinUTS = pinnedNamespace{"uts", unix.CLONE_NEWUTS}
	pinIPC = pinnedNamespace{"ipc", unix.CLONE_NEWIPC}
)

// pinSpec is what a pod's pinned sandbox holds.
type pinSpec struct {
	namespaces []pinnedNamespace
	hostname   string // set in the new UTS namespace
	// userNS, when not 0, is the first host ID of a new user namespace that holds the
	// others (pinInUserNamespace), made by self (the helper) as a child process.
	userNS uint32
	self   string
}

// pinDir is the directory of the pins of sandbox id.
func (r *Runtime) pinDir(id string) string {
	return filepath.Join(r.cfg.RootDir, namespacesDir, id)
}

// pinNamespaces creates new namespaces as spec says, sets them up (loopback up, the
// hostname) and pins each at dir/<file>. It undoes what it did when it fails.
//
// The namespaces are made by unshare on a locked thread, which then enters the
// namespaces it came from again before it is unlocked. Should that fail, the thread
// stays locked: Go ends it with its goroutine (the main thread it parks instead, so
// returning matters there too), and no other goroutine ever runs in a pod's namespaces.
func pinNamespaces(dir string, spec pinSpec) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pin namespaces: %w", err)
	}
	if spec.userNS != 0 {
		if err := pinInUserNamespace(dir, spec); err != nil {
			return errors.Join(fmt.Errorf("pin namespaces: %w", err), unpinNamespaces(dir))
		}
		return nil
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := threadNamespaces(spec.namespaces)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("pin namespaces: %w", err)
			return
		}
		err = pinOnThisThread(dir, spec)
		if enter(home) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		return errors.Join(fmt.Errorf("pin namespaces: %w", err), unpinNamespaces(dir))
	}
	return nil
}

// threadNamespaces opens the calling thread's namespaces of the given kinds, so that
// it can enter them again (see enter), by their clone flags.
func threadNamespaces(kinds []pinnedNamespace) (map[int]*os.File, error) {
	out := map[int]*os.File{}
	for _, ns := range kinds {
		f, err := os.Open("/proc/thread-self/ns/" + ns.file)
		if err != nil {
			enter(out) // closes what was opened
			return nil, err
		}
		out[ns.flag] = f
	}
	return out, nil
}

// enter makes the calling thread enter the namespaces of files (by clone flag) and
// closes them. It reports the first failure.
func enter(files map[int]*os.File) error {
	var errs []error
	for flag, f := range files {
		if err := unix.Setns(int(f.Fd()), flag); err != nil {
			errs = append(errs, fmt.Errorf("return to the host's namespace %s: %w", f.Name(), err))
		}
		f.Close()
	}
	return errors.Join(errs...)
}

func pinOnThisThread(dir string, spec pinSpec) error {
	flags := 0
	for _, ns := range spec.namespaces {
		flags |= ns.flag
	}
	if err := unix.Unshare(flags); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	for _, ns := range spec.namespaces {
		switch ns {
		case pinUTS:
			if err := unix.Sethostname([]byte(spec.hostname)); err != nil {
				return fmt.Errorf("set hostname %q: %w", spec.hostname, err)
			}
		case pinNet:
			// runc brings loopback up only in a network namespace it creates itself.
			if err := pause.LoopbackUp(); err != nil {
				return err
			}
		}
		if err := pinThreadNamespace(ns.file, filepath.Join(dir, ns.file)); err != nil {
			return err
		}
	}
	return nil
}

// pinThreadNamespace bind-mounts the calling thread's namespace file onto path.
func pinThreadNamespace(file, path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return fmt.Errorf("pin %s namespace: %w", file, err)
	}
	f.Close()
	if err := unix.Mount("/proc/thread-self/ns/"+file, path, "none", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("pin %s namespace at %s: %w", file, path, err)
	}
	return nil
}

// unpinNamespaces unmounts the pins in dir and removes it. The namespaces end once
// nothing else holds them.
func unpinNamespaces(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unpin namespaces: %w", err)
	}
	var errs []error
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			errs = append(errs, fmt.Errorf("unpin %s: %w", path, err))
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("unpin namespaces: %w", err))
		}
	}
	return errors.Join(errs...)
}

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

// pinsHeld reports whether every namespace in files is still pinned in dir: a reboot,
// or someone's umount, leaves empty files, and a staticpod killed while pinning leaves
// some missing. Only a missing file or one that holds no namespace counts as lost; any
// other error (out of descriptors, say) is taken for held, and the next repair looks
// again.
func pinsHeld(dir string, files []string) bool {
	for _, file := range files {
		var st unix.Statfs_t
		err := unix.Statfs(filepath.Join(dir, file), &st)
		if err == unix.ENOENT || err == nil && st.Type != nsfsMagic {
			return false
		}
	}
	return true
}

// pinnedFiles are the namespace files a pinned sandbox holds, from its label; a
// sandbox recorded without it holds at least net and uts.
func pinnedFiles(labels map[string]string) []string {
	if files := labels[labelPinnedFiles]; files != "" {
		return strings.Split(files, ",")
	}
	return []string{pinNet.file, pinUTS.file}
}

// isNamespace reports whether path is a namespace file (a pin that holds).
func isNamespace(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == nsfsMagic
}

// pinProcessNamespace pins the namespace ns of process pid at dir/<ns.file>: the
// network namespace of a sandbox process, so that its pod network can be torn down in
// it even after the process is gone.
func pinProcessNamespace(pid uint32, ns pinnedNamespace, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pin %s namespace: %w", ns.file, err)
	}
	path := filepath.Join(dir, ns.file)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return fmt.Errorf("pin %s namespace: %w", ns.file, err)
	}
	f.Close()
	if err := unix.Mount(fmt.Sprintf("/proc/%d/ns/%s", pid, ns.file), path, "none", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("pin %s namespace at %s: %w", ns.file, path, err)
	}
	return nil
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
	if pinsHeld(rp.rt.pinsOf(info.Labels), pinnedFiles(info.Labels)) {
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
	if err := unpinNamespaces(r.pinsOf(labels)); err != nil {
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
	dir := filepath.Join(rp.rt.cfg.RootDir, namespacesDir)
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
		if err := unpinNamespaces(filepath.Join(dir, e.Name())); err != nil {
			rp.rt.log.Warn("remove the pinned namespaces of a sandbox that is gone", "id", e.Name(), "err", err)
			continue
		}
		rp.rt.log.Info("removed the pinned namespaces of a sandbox that is gone", "id", e.Name())
	}
}
