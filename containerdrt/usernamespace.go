package containerdrt

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/staticpod/staticpod/containerdrt/pins"
	"golang.org/x/sys/unix"
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
//     child is ended, and staticpod sets the hostname and brings loopback up in them
//     (package pins).
//   - A sandbox process (shareProcessNamespace) is given the user namespace by runc,
//     from the mapping in its spec; runc makes its other namespaces inside it.
//
// Containers join the sandbox's user namespace by path, with the mapping in their spec
// too (runc maps the owners of what it creates by it). The image's files are owned by
// the mapped IDs through a remapped snapshot (client.WithRemappedSnapshot: containerd's
// client copies the image's layers into a snapshot whose files it chowns, which works
// against containerd 1.6 and 2.x alike, and is shared by the pod's containers of that
// image); the pod directory's files by poddir.

// checkOwnUserNamespace fails unless the sandbox's namespaces in nsDir hold a user
// namespace other than the host's: a container of a pod with hostUsers: false never
// runs in the host's user namespace, whatever made its sandbox.
func checkOwnUserNamespace(nsDir string) error {
	var sandbox, host unix.Stat_t
	if err := unix.Stat(filepath.Join(nsDir, pins.User.File), &sandbox); err != nil {
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
