package poddir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// A volumeMount's subPath is mounted as the kubelet mounts it (pkg/volume/util/subpath,
// doBindSubPath): the subPath is opened beneath its volume without following any
// symlink, the opened file is bind-mounted through its descriptor onto a mount point
// in the pod's dir, and runc is given that mount point. Checking a path and handing it
// to runc as a string would leave a window in which a container of the pod that
// writes the volume swaps a directory of the subPath for a symlink to any host path,
// which runc's bind would then follow.
//
// The mount points are <pod dir>/volume-subpaths/<volume>/<container>/<index of the
// volumeMount>, the kubelet's layout. They live as long as the pod's directory: a
// container that restarts, or a staticpod that restarts, reuses a mount that still
// holds the subPath's file and replaces one that does not; Remove unmounts them
// (cleanSubPaths) before anything is removed.
const (
	volumeSubpathsDir = "volume-subpaths"
	subPathDirMode    = 0o750 // the kubelet's, for the mount points and the directories above them
	subPathFileMode   = 0o640
	// unmountTries bounds the unmounts of one mount point: mounts stacked there are
	// unmounted one at a time.
	unmountTries = 16
	// openat2Tries bounds the retries of an openat2 that a rename elsewhere in the
	// file system interrupted (EAGAIN).
	openat2Tries = 16
)

// subPathError is a subPath that cannot be mounted; it reads as the kubelet's event.
type subPathError struct {
	volume, container string
	err               error
}

func (e *subPathError) Error() string {
	return fmt.Sprintf("failed to prepare subPath for volumeMount %q of container %q: %v", e.volume, e.container, e.err)
}

func (e *subPathError) Unwrap() error { return e.err }

// prepareSubPath returns the host path runc binds for the volumeMount at index of
// container, whose subPath sub lies in volume, found at volumePath: a mount point in
// podDir holding what sub names in the volume. A missing subPath is made a directory
// first, with the mode of the volume's root, as the kubelet makes it; in an image
// (image volumes, read-only) nothing is made, and sub must be a directory, as
// containerd's CRI requires (ensureImageSubPath).
func prepareSubPath(podDir, volume, container string, index int, volumePath, sub string, image bool) (string, error) {
	if filepath.IsAbs(sub) || slices.Contains(strings.Split(sub, "/"), "..") {
		return "", fmt.Errorf("subPath %q must be a relative path without '..'", sub)
	}
	target, err := subPathTarget(podDir, volume, container, index)
	if err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(volumePath)
	if err != nil {
		return "", fmt.Errorf("resolve volume path %s: %w", volumePath, err)
	}
	if !image {
		if err := createSubPath(root, sub); err != nil {
			return "", err
		}
	}
	f, err := openSubPath(root, sub)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if image {
		if fi, err := f.Stat(); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("subPath %q of an image must be a directory of the image", sub)
		}
	}
	if err := bindSubPath(f, target); err != nil {
		return "", err
	}
	return target, nil
}

// subPathTarget is the mount point of a subPath. Volume and container names are DNS
// labels by validation; they are checked again here, as they become path components.
func subPathTarget(podDir, volume, container string, index int) (string, error) {
	for _, name := range []string{volume, container} {
		if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
			return "", fmt.Errorf("name %q cannot be a path component", name)
		}
	}
	return filepath.Join(podDir, volumeSubpathsDir, volume, container, strconv.Itoa(index)), nil
}

// createSubPath makes subPath under root when it does not exist. os.Root refuses to
// follow a symlink out of root, so nothing is ever created outside the volume; an
// escaping subPath is left for openSubPath to report.
func createSubPath(root, subPath string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("open volume %s: %w", root, err)
	}
	defer r.Close()
	if _, err := r.Stat(subPath); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	fi, err := r.Stat(".")
	if err != nil {
		return fmt.Errorf("stat volume %s: %w", root, err)
	}
	perm := fi.Mode().Perm()
	if err := r.MkdirAll(subPath, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create subPath %q: %w", subPath, err)
	}
	if err := r.Chmod(subPath, perm); err != nil { // MkdirAll's mode is cut by the umask
		return fmt.Errorf("chmod subPath %q: %w", subPath, err)
	}
	return nil
}

// openSubPath opens sub in the volume at root (resolved) as the kubelet does: the
// symlinks in sub are resolved first and must lead to a path in the volume; that
// path is then opened beneath root refusing any symlink (openBeneath), so that a
// component swapped for a symlink after the resolution fails the open instead of
// leading out. The file opened must still be in the volume.
func openSubPath(root, sub string) (*os.File, error) {
	resolved, err := filepath.EvalSymlinks(filepath.Join(root, sub))
	if err != nil {
		return nil, fmt.Errorf("resolve subPath %q: %w", sub, err)
	}
	if !within(root, resolved) {
		return nil, fmt.Errorf("subPath %q leads outside the volume", sub)
	}
	rel, err := filepath.Rel(root, resolved)
	if err != nil {
		return nil, fmt.Errorf("resolve subPath %q: %w", sub, err)
	}
	f, err := openBeneath(root, rel)
	if err != nil {
		return nil, fmt.Errorf("open subPath %q: %w", sub, err)
	}
	if at, err := os.Readlink(fdPath(f)); err != nil || !within(root, at) {
		f.Close()
		return nil, fmt.Errorf("subPath %q left the volume while it was opened", sub)
	}
	return f, nil
}

// fdPath names the file f holds open, whatever became of its path.
func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// openBeneath opens rel beneath the directory root with O_PATH, following no symlink
// (a symlink as the last component is refused too) and never leaving root: with
// openat2's RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it (Linux 5.6),
// else component by component (openatBeneath).
func openBeneath(root, rel string) (*os.File, error) {
	return openBeneathWith(root, rel, func(dir int, rel string) (int, error) {
		fd, err := openat2Beneath(dir, rel)
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) { // no openat2, or a seccomp filter that refuses it
			return openatBeneath(dir, rel)
		}
		return fd, err
	})
}

// openBeneathWith is openBeneath with the open of rel from the directory dir given.
func openBeneathWith(root, rel string, open func(dir int, rel string) (int, error)) (*os.File, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(dir)
	fd, err := open(dir, rel)
	if err != nil {
		return nil, err
	}
	if err := refuseSymlink(fd, rel); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, rel)), nil
}

// openat2Beneath opens rel from dir with openat2, refusing symlinks and any path out
// of dir. A trailing symlink is opened itself (O_NOFOLLOW), for the caller to refuse.
func openat2Beneath(dir int, rel string) (int, error) {
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for range openat2Tries {
		fd, err := unix.Openat2(dir, rel, &how)
		if err == unix.EAGAIN || err == unix.EINTR { // a rename elsewhere raced the lookup
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "openat2", Path: rel, Err: err}
		}
		return fd, nil
	}
	return -1, &os.PathError{Op: "openat2", Path: rel, Err: unix.EAGAIN}
}

// openatBeneath opens rel from dir one component at a time, each with
// openat(O_PATH|O_NOFOLLOW) from the one before, refusing symlinks and '..'.
func openatBeneath(dir int, rel string) (int, error) {
	cur, err := unix.FcntlInt(uintptr(dir), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("dup: %w", err)
	}
	for seg := range strings.SplitSeq(rel, "/") {
		switch seg {
		case "", ".":
			continue
		case "..":
			unix.Close(cur)
			return -1, fmt.Errorf("%s: '..' leads out", rel)
		}
		next, err := unix.Openat(cur, seg, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if err != nil {
			return -1, &os.PathError{Op: "openat", Path: seg, Err: err}
		}
		if err := refuseSymlink(next, seg); err != nil {
			unix.Close(next)
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// refuseSymlink fails when fd, opened as name, is a symlink.
func refuseSymlink(fd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return &os.PathError{Op: "open", Path: name, Err: errors.New("a symbolic link")}
	}
	return nil
}

// bindSubPath bind-mounts the opened file f at target through its descriptor: the
// mount holds the very file that was opened, whatever became of its path since. A
// mount already at target is kept when it holds the same file (a container or
// staticpod restarted) and replaced otherwise.
func bindSubPath(f *os.File, target string) error {
	var want unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &want); err != nil {
		return fmt.Errorf("stat subPath: %w", err)
	}
	mounted, err := mountinfo.Mounted(target)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("check mount at %s: %w", target, err)
	}
	if mounted {
		var got unix.Stat_t
		if err := unix.Lstat(target, &got); err == nil && got.Dev == want.Dev && got.Ino == want.Ino {
			return nil
		}
		if err := unmountSubPath(target); err != nil {
			return err
		}
	}
	if err := makeMountPoint(target, want.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return err
	}
	if err := unix.Mount(fdPath(f), target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind subPath at %s: %w", target, err)
	}
	return nil
}

// makeMountPoint makes target a directory or an empty file, as what is bound there is
// one or not (a file takes a bind of any other kind), with its parents. One of the
// other kind, left by an earlier subPath, is replaced.
func makeMountPoint(target string, dir bool) error {
	if err := os.MkdirAll(filepath.Dir(target), subPathDirMode); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(target), err)
	}
	fi, err := os.Lstat(target)
	switch {
	case err == nil && fi.IsDir() == dir && (dir || fi.Mode().IsRegular()):
		return nil
	case err == nil:
		if err := os.Remove(target); err != nil {
			return fmt.Errorf("replace mount point: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("mount point: %w", err)
	}
	if dir {
		if err := os.Mkdir(target, subPathDirMode); err != nil {
			return fmt.Errorf("create mount point: %w", err)
		}
		return nil
	}
	fd, err := unix.Open(target, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, subPathFileMode)
	if err != nil {
		return &os.PathError{Op: "create mount point", Path: target, Err: err}
	}
	return unix.Close(fd)
}

// unmountSubPath unmounts everything mounted at target, never following a symlink
// there. Lazily (MNT_DETACH): a container that runs keeps its view.
func unmountSubPath(target string) error {
	for range unmountTries {
		switch err := unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err {
		case nil:
		case unix.EINVAL, unix.ENOENT: // not (or no longer) a mount point
			return nil
		default:
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after %d unmounts", target, unmountTries)
}

// cleanSubPaths unmounts and removes every subPath mount point of the pod at podDir,
// as the kubelet's CleanSubPaths does when a pod's volumes go. Each mount point is
// unmounted and then removed on its own (rmdir or unlink: nothing that could descend
// into what stays mounted), and so are the directories above it.
func cleanSubPaths(podDir string) error {
	return removeMountPoints(filepath.Join(podDir, volumeSubpathsDir), 3)
}

// removeMountPoints removes dir, whose entries depth levels down are mount points.
func removeMountPoints(dir string, depth int) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clean subPaths: %w", err)
	}
	var errs []error
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		switch {
		case depth > 1 && e.IsDir():
			errs = append(errs, removeMountPoints(path, depth-1))
		case depth > 1: // not staticpod's
			errs = append(errs, os.Remove(path))
		default:
			if err := unmountSubPath(path); err != nil {
				errs = append(errs, fmt.Errorf("clean subPaths: %w", err))
				continue
			}
			errs = append(errs, os.Remove(path))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil {
		return fmt.Errorf("clean subPaths: %w", err)
	}
	return nil
}
