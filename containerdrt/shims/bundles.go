package shims

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// taskBundles is the directory of containerd's state dir that holds the task bundles,
// one directory per namespace and, in it, one per container:
// <state>/io.containerd.runtime.v2.task/<namespace>/<id>.
const taskBundles = "io.containerd.runtime.v2.task"

// runcBundle returns the bundle runc was given for container id of namespace ns, from
// the state it keeps under root (runc records it as the label bundle=<path>). runc and
// containerd write there as root alone: unlike a process's working directory, nobody
// else can make it say anything.
func runcBundle(root, ns, id string) (string, error) {
	if !isContainerID(id) {
		return "", fmt.Errorf("runc state of %q: no container ID of staticpod's", id)
	}
	data, err := os.ReadFile(filepath.Join(root, ns, id, "state.json"))
	if err != nil {
		return "", fmt.Errorf("runc state of container %s: %w", id, err)
	}
	var state struct {
		Config struct {
			Labels []string `json:"labels"`
		} `json:"config"`
	}
	if err := json.Unmarshal(data, &state); err != nil {
		return "", fmt.Errorf("runc state of container %s: %w", id, err)
	}
	for _, l := range state.Config.Labels {
		if bundle, ok := strings.CutPrefix(l, "bundle="); ok {
			return bundle, nil
		}
	}
	return "", fmt.Errorf("runc state of container %s names no bundle", id)
}

// bundleDir is the directory of a namespace's task bundles in containerd's state dir,
// opened without following a symlink: what is made and removed in it stays in it.
type bundleDir struct {
	path string   // as opened, its symlinks resolved
	fd   int      // O_PATH
	root *os.Root // the same directory
}

// openBundleDir opens the directory of bundle, the task bundle of container id in
// namespace ns (<state>/io.containerd.runtime.v2.task/<ns>/<id>), after checking that
// the path has that shape for a staticpod container ID. No component of the directory
// may be a symlink once the symlinks of the path as given are resolved (the state dir
// may be spelled through /var/run), and it must be root's and writable by root alone,
// as containerd makes it: nobody else can then have put or swapped anything in it.
func openBundleDir(bundle, ns, id string) (*bundleDir, error) {
	dir := filepath.Dir(bundle)
	if !isContainerID(id) || !filepath.IsAbs(bundle) || filepath.Clean(bundle) != bundle ||
		filepath.Base(bundle) != id || filepath.Base(dir) != ns || filepath.Base(filepath.Dir(dir)) != taskBundles {
		return nil, fmt.Errorf("%s is no task bundle of container %q in namespace %s", bundle, id, ns)
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("open the task bundles of namespace %s: %w", ns, err)
	}
	fd, err := openNoFollow(resolved)
	if err != nil {
		return nil, fmt.Errorf("open the task bundles of namespace %s: %w", ns, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Uid != 0 || st.Mode&0o022 != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("open the task bundles of namespace %s: %s is not root's alone (uid %d, mode %o, %v)", ns, resolved, st.Uid, st.Mode&0o7777, err)
	}
	root, err := os.OpenRoot(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open the task bundles of namespace %s: %w", ns, err)
	}
	return &bundleDir{path: resolved, fd: fd, root: root}, nil
}

// openNoFollow opens directory path (absolute, clean) as O_PATH, one component at a
// time, failing on any that is a symlink.
func openNoFollow(path string) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for name := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		if name == "" {
			continue
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("open %s without following symlinks: %s: %w", path, name, err)
		}
		fd = next
	}
	return fd, nil
}

func (b *bundleDir) Close() {
	b.root.Close()
	unix.Close(b.fd)
}

// restore makes bundle name again, empty, if it is gone, and reports whether it did.
func (b *bundleDir) restore(name string) (bool, error) {
	if _, err := b.root.Lstat(name); err == nil {
		return false, nil
	}
	if err := b.root.Mkdir(name, 0o700); err != nil {
		return false, fmt.Errorf("make the bundle %s again: %w", filepath.Join(b.path, name), err)
	}
	return true, nil
}

// remove removes bundle name with what it holds, after unmounting its rootfs, and
// follows no symlink doing it. A bundle that is gone is no error.
func (b *bundleDir) remove(name string) error {
	if _, err := b.root.Lstat(name); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// Through the directory's descriptor; UMOUNT_NOFOLLOW leaves a rootfs that is a
	// symlink alone (nobody but root writes here: it never is one).
	unix.Unmount(fmt.Sprintf("/proc/self/fd/%d/%s/rootfs", b.fd, name), unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	if err := b.root.RemoveAll(name); err != nil {
		return fmt.Errorf("remove the bundle %s: %w", filepath.Join(b.path, name), err)
	}
	return nil
}

// RestoreBundle makes the bundle directory of container id of namespace ns again if it
// is gone, empty, until the returned function is called. Its path is the one runc was
// given for the container (its state under runcRoot names it), checked to be
// <state>/io.containerd.runtime.v2.task/<ns>/<id>; it is made and removed in that
// directory, opened without following symlinks (openBundleDir). Nothing of the shim
// process (its working directory, its flags) names it: anyone can fake those.
func RestoreBundle(runcRoot, ns, id string) (func(), error) {
	bundle, err := runcBundle(runcRoot, ns, id)
	if err != nil {
		return nil, fmt.Errorf("find the bundle of container %s: %w", id, err)
	}
	dir, err := openBundleDir(bundle, ns, id)
	if err != nil {
		return nil, err
	}
	made, err := dir.restore(id)
	if err != nil || !made {
		dir.Close()
		return func() {}, err
	}
	return func() {
		dir.remove(id)
		dir.Close()
	}, nil
}
