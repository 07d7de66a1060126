package containerdrt

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/internal/pause"
)

// A pod with hostUsers: false runs in a user namespace of its own, mapped as
// containerdrt/userns allocates (65536 IDs per pod, kept in the pod's directory). Its
// sandbox holds the namespace, and every other namespace of the pod belongs to it: the
// kernel lets a container mount /sys only in a network namespace of its user namespace,
// and /dev/mqueue only in such an IPC namespace, and a process in the user namespace
// cannot join namespaces of the host's.
//
//   - A pinned sandbox (the usual pod with its own network) is made by a child process,
//     staticpod's helper as `pause`, cloned into new user, network, UTS and IPC
//     namespaces at once (the others then belong to the new user namespace) with the
//     pod's mapping: a Go program has several threads, and only a process of one thread
//     may make a user namespace. The namespaces are pinned from /proc/<pid>/ns, the
//     child is ended, and staticpod sets the hostname and brings loopback up in them.
//   - A sandbox process (shareProcessNamespace) is given the user namespace by runc,
//     from the mapping in its spec; runc makes its other namespaces inside it.
//
// Containers join the sandbox's user namespace by path, with the mapping in their spec
// too (runc maps the owners of what it creates by it). The image's files are owned by
// the mapped IDs through a remapped snapshot (client.WithRemappedSnapshot: containerd's
// client copies the image's layers into a snapshot whose files it chowns, which works
// against containerd 1.6 and 2.x alike, and is shared by the pod's containers of that
// image); the pod directory's files by poddir.

var pinUser = pinnedNamespace{"user", unix.CLONE_NEWUSER}

// pinInUserNamespace makes and pins the namespaces of spec in a new user namespace
// mapped from spec.userNS: see above. The child runs the helper through a descriptor
// opened here, so that directories only the host's root may search (a root dir of mode
// 0700) do not keep the mapped root from executing it.
func pinInUserNamespace(dir string, ps pinSpec) error {
	flags := 0
	for _, ns := range ps.namespaces {
		flags |= ns.flag
	}
	bin, err := os.Open(ps.self)
	if err != nil {
		return fmt.Errorf("make user namespace: %w", err)
	}
	defer bin.Close()
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(ps.userNS), Size: spec.UserNSLength}}
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
	for _, ns := range ps.namespaces {
		if err := pinProcessNamespace(uint32(cmd.Process.Pid), ns, dir); err != nil {
			return err
		}
	}
	return setUpPinned(dir, ps)
}

// setUpPinned sets the hostname in the pinned UTS namespace and brings loopback up in
// the pinned network namespace, from a locked thread that enters them and returns to
// its own (see pinNamespaces for a thread that cannot).
func setUpPinned(dir string, ps pinSpec) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		kinds := []pinnedNamespace{pinUTS, pinNet}
		home, err := threadNamespaces(kinds)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		err = setUpOnThisThread(dir, ps.hostname)
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
	for _, ns := range []pinnedNamespace{pinUTS, pinNet} {
		f, err := os.Open(filepath.Join(dir, ns.file))
		if err != nil {
			return err
		}
		err = unix.Setns(int(f.Fd()), ns.flag)
		f.Close()
		if err != nil {
			return fmt.Errorf("enter pinned %s namespace: %w", ns.file, err)
		}
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return fmt.Errorf("set hostname %q: %w", hostname, err)
	}
	return pause.LoopbackUp()
}

// checkOwnUserNamespace fails unless the sandbox's namespaces in nsDir hold a user
// namespace other than the host's: a container of a pod with hostUsers: false never
// runs in the host's user namespace, whatever made its sandbox.
func checkOwnUserNamespace(nsDir string) error {
	var sandbox, host unix.Stat_t
	if err := unix.Stat(filepath.Join(nsDir, pinUser.file), &sandbox); err != nil {
		return fmt.Errorf("the sandbox holds no user namespace of the pod's own: %w", err)
	}
	if err := unix.Stat("/proc/self/ns/user", &host); err != nil {
		return fmt.Errorf("the host's user namespace: %w", err)
	}
	if sandbox.Ino == host.Ino && sandbox.Dev == host.Dev {
		return errors.New("the sandbox is in the host's user namespace")
	}
	return nil
}

// checkSearchable fails unless every directory above path may be searched by all: runc
// mounts a sandbox process's root file system from inside the pod's user namespace,
// whose root is no owner of the host's directories.
func checkSearchable(path string) error {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			return err
		}
		if st.Mode&0o001 == 0 {
			return fmt.Errorf("a pod with hostUsers: false and shareProcessNamespace has its sandbox's root at %s, which its user namespace cannot reach: %s is not searchable by all (give the root dir mode 0711 or wider)", path, dir)
		}
		if dir == "/" {
			return nil
		}
	}
}
