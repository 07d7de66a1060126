// Package pins makes a pod's namespaces and pins them as files. A pod with its own
// network needs no process to hold its namespaces: they are pinned as files, bind mounts of the namespaces' nsfs entries under the run dir, as
// containerd's CRI pins a pod's network namespace and `ip netns add` does. The pod's
// containers join them by path. A namespace lives as long as a mount of it, a process
// in it or an open descriptor to it, so the pod's namespaces outlive restarts of all of
// its containers and of staticpod, and go when the pins are unmounted (Unpin)
// once nothing runs in them. Only a pod that shares one PID namespace between its
// containers still has a sandbox process: a PID namespace needs an init.
//
// Which sandbox the pins belong to, and where they are, is containerdrt's.
package pins

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/staticpod/staticpod/containerdrt/userns"
	"github.com/staticpod/staticpod/internal/pause"
)

// nsfsMagic is the file system type statfs reports for a namespace file.
const nsfsMagic = 0x6e736673

// Namespace is one namespace a pinned sandbox can hold: the name of its file
// under /proc/<pid>/ns (and in the sandbox's pin directory) and its clone flag.
type Namespace struct {
	File string
	Flag int
}

var (
	Net = Namespace{"net", unix.CLONE_NEWNET}
	UTS = Namespace{"uts", unix.CLONE_NEWUTS}
	IPC = Namespace{"ipc", unix.CLONE_NEWIPC}
)

// Spec is what a pod's pinned sandbox holds.
type Spec struct {
	Namespaces []Namespace
	Hostname   string // set in the new UTS namespace
	// UserNS, when not 0, is the first host ID of a new user namespace that holds the
	// others (pinInUserNamespace), made by Self (the helper) as a child process.
	UserNS uint32
	Self   string
}

// Pin creates new namespaces as spec says, sets them up (loopback up, the
// hostname) and pins each at dir/<file>. It undoes what it did when it fails.
//
// The namespaces are made by unshare on a locked thread, which then enters the
// namespaces it came from again before it is unlocked. Should that fail, the thread
// stays locked: Go ends it with its goroutine (the main thread it parks instead, so
// returning matters there too), and no other goroutine ever runs in a pod's namespaces.
func Pin(dir string, spec Spec) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pin namespaces: %w", err)
	}
	if spec.UserNS != 0 {
		if err := pinInUserNamespace(dir, spec); err != nil {
			return errors.Join(fmt.Errorf("pin namespaces: %w", err), Unpin(dir))
		}
		return nil
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := threadNamespaces(spec.Namespaces)
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
		return errors.Join(fmt.Errorf("pin namespaces: %w", err), Unpin(dir))
	}
	return nil
}

// threadNamespaces opens the calling thread's namespaces of the given kinds, so that
// it can enter them again (see enter), by their clone flags.
func threadNamespaces(kinds []Namespace) (map[int]*os.File, error) {
	out := map[int]*os.File{}
	for _, ns := range kinds {
		f, err := os.Open("/proc/thread-self/ns/" + ns.File)
		if err != nil {
			enter(out) // closes what was opened
			return nil, err
		}
		out[ns.Flag] = f
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

func pinOnThisThread(dir string, spec Spec) error {
	flags := 0
	for _, ns := range spec.Namespaces {
		flags |= ns.Flag
	}
	if err := unix.Unshare(flags); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	for _, ns := range spec.Namespaces {
		switch ns {
		case UTS:
			if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
				return fmt.Errorf("set hostname %q: %w", spec.Hostname, err)
			}
		case Net:
			// runc brings loopback up only in a network namespace it creates itself.
			if err := pause.LoopbackUp(); err != nil {
				return err
			}
		}
		if err := pinThreadNamespace(ns.File, filepath.Join(dir, ns.File)); err != nil {
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

// PinProcess pins the namespace ns of process pid at dir/<ns.File>: the
// network namespace of a sandbox process, so that its pod network can be torn down in
// it even after the process is gone.
func PinProcess(pid uint32, ns Namespace, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pin %s namespace: %w", ns.File, err)
	}
	path := filepath.Join(dir, ns.File)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return fmt.Errorf("pin %s namespace: %w", ns.File, err)
	}
	f.Close()
	if err := unix.Mount(fmt.Sprintf("/proc/%d/ns/%s", pid, ns.File), path, "none", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("pin %s namespace at %s: %w", ns.File, path, err)
	}
	return nil
}

// User is the user namespace of a pod with hostUsers: false, made by a child
// process (pinInUserNamespace; containerdrt checks a container joins it).
var User = Namespace{"user", unix.CLONE_NEWUSER}

// pinInUserNamespace makes and pins the namespaces of spec in a new user namespace
// mapped from spec.UserNS: see Pin. The child runs the helper through a descriptor
// opened here, so that directories only the host's root may search (a root dir of mode
// 0700) do not keep the mapped root from executing it.
func pinInUserNamespace(dir string, ps Spec) error {
	flags := 0
	for _, ns := range ps.Namespaces {
		flags |= ns.Flag
	}
	bin, err := os.Open(ps.Self)
	if err != nil {
		return fmt.Errorf("make user namespace: %w", err)
	}
	defer bin.Close()
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(ps.UserNS), Size: userns.Length}}
	cmd := exec.Command("/proc/self/fd/3", "pause")
	cmd.ExtraFiles = []*os.File{bin}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: uintptr(flags), UidMappings: ids, GidMappings: ids,
		GidMappingsEnableSetgroups: true, // else setgroups is denied in the namespace for good
		Pdeathsig:                  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("make user namespace: %w", err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	for _, ns := range ps.Namespaces {
		if err := PinProcess(uint32(cmd.Process.Pid), ns, dir); err != nil {
			return err
		}
	}
	return setUpPinned(dir, ps)
}

// setUpPinned sets the hostname in the pinned UTS namespace and brings loopback up in
// the pinned network namespace, from a locked thread that enters them and returns to
// its own (see Pin for a thread that cannot).
func setUpPinned(dir string, ps Spec) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		kinds := []Namespace{UTS, Net}
		home, err := threadNamespaces(kinds)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		err = setUpOnThisThread(dir, ps.Hostname)
		if enter(home) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		return fmt.Errorf("set up pinned namespaces: %w", err)
	}
	return nil
}

func setUpOnThisThread(dir, hostname string) error {
	for _, ns := range []Namespace{UTS, Net} {
		f, err := os.Open(filepath.Join(dir, ns.File))
		if err != nil {
			return err
		}
		err = unix.Setns(int(f.Fd()), ns.Flag)
		f.Close()
		if err != nil {
			return fmt.Errorf("enter pinned %s namespace: %w", ns.File, err)
		}
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return fmt.Errorf("set hostname %q: %w", hostname, err)
	}
	return pause.LoopbackUp()
}

// Unpin unmounts the pins in dir and removes it. The namespaces end once
// nothing else holds them.
func Unpin(dir string) error {
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

// Held reports whether every namespace in files is still pinned in dir: a reboot,
// or someone's umount, leaves empty files, and a staticpod killed while pinning leaves
// some missing. Only a missing file or one that holds no namespace counts as lost; any
// other error (out of descriptors, say) is taken for held, and the next repair looks
// again.
func Held(dir string, files []string) bool {
	for _, file := range files {
		var st unix.Statfs_t
		err := unix.Statfs(filepath.Join(dir, file), &st)
		if err == unix.ENOENT || err == nil && st.Type != nsfsMagic {
			return false
		}
	}
	return true
}

// IsNamespace reports whether path is a namespace file (a pin that holds).
func IsNamespace(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == nsfsMagic
}
