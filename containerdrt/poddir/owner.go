package poddir

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/containerdrt/userns"
)

// A pod with hostUsers: false sees the files of its directory through its user
// namespace, whose IDs 0..65535 are the host's mapped.HostID and up. What staticpod
// writes for such a pod (its /etc files, emptyDir directories, the files of configMap,
// secret, projected and downwardAPI volumes, the termination-message file, the pod's
// /dev/shm) is owned by the mapped IDs, so that root in the container owns what it
// would own without the namespace; a host file root-owned would be nobody's inside.

// owner is who owns the files staticpod writes for a pod: -1 leaves an ID as the
// writer (root) made it.
type owner struct{ uid, gid int }

// userNamespace is the first host ID of the pod's user namespace as recorded in its
// directory (userns.Read), 0 for a pod in the host's. A pod with hostUsers: false that
// has none recorded is an error: its files would be owned by the host's root.
func userNamespace(pod *corev1.Pod, podDir string) (uint32, error) {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return 0, nil
	}
	m, found, err := userns.Read(podDir)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("pod %s/%s has hostUsers: false and no user namespace recorded in %s", pod.Namespace, pod.Name, podDir)
	}
	return m.HostID, nil
}

// rootOwner owns the pod's own files: root, mapped; -1, -1 in the host's namespace.
func rootOwner(in spec.Input) owner {
	if in.UserNSHostID == 0 {
		return owner{-1, -1}
	}
	return owner{int(in.UserNSHostID), int(in.UserNSHostID)}
}

// volumeOwner owns the files of configMap, secret and projected volumes: root, and the
// pod's fsGroup if it has one; mapped in the pod's user namespace.
func volumeOwner(in spec.Input) owner {
	o := owner{-1, fsGroup(in.Pod)}
	if base := int(in.UserNSHostID); base != 0 {
		o.uid = base
		o.gid = max(o.gid, 0) + base
	}
	return o
}

// dirOwner owns the directories and links of a volume o owns files of: root, mapped, in
// a user namespace; as written otherwise.
func (o owner) dirOwner() owner {
	if o.uid < 0 {
		return owner{-1, -1}
	}
	return owner{o.uid, o.uid}
}

// none says whether o leaves every ID as written.
func (o owner) none() bool { return o.uid < 0 && o.gid < 0 }

// lchown gives path (a link itself, not what it points to) to o.
func (o owner) lchown(path string) error {
	if o.none() {
		return nil
	}
	if err := os.Lchown(path, o.uid, o.gid); err != nil {
		return fmt.Errorf("chown %s: %w", path, err)
	}
	return nil
}

// lchownTree gives dir and everything below it to o, without following links.
func (o owner) lchownTree(dir string) error {
	if o.none() {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return o.lchown(path)
	})
}

// owns reports whether a file is o's; an ID of -1 matches any.
func (o owner) owns(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return o.none()
	}
	return (o.uid < 0 || int(st.Uid) == o.uid) && (o.gid < 0 || int(st.Gid) == o.gid)
}
