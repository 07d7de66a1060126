package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Paths outside the daemon's directory that containerd, its shims and runc use for every
// daemon on the host, keyed by namespace and container ID. containerd 1.6 and 2.x agree on
// them.
const (
	shimSocketDir = "/run/containerd/s"    // shim sockets, named by a hash of address/ns/id
	runcRoot      = "/run/containerd/runc" // runc state, /<ns>/<id>, unless runc options say otherwise
	cgroupRoot    = "/sys/fs/cgroup"       // the default spec's cgroups are /<ns>/<id>
)

// removeHostState removes what a namespace left outside the daemon's directory once its
// containers are gone: empty cgroups and runc's state directory. It is called only for
// namespaces Namespace handed out, whose random names nobody else uses.
func removeHostState(ns string) error {
	roots, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", ns))
	for _, root := range append(roots, filepath.Join(cgroupRoot, ns)) {
		removeEmptyCgroups(root)
	}
	if err := os.RemoveAll(filepath.Join(runcRoot, ns)); err != nil {
		return fmt.Errorf("remove runc state of %s: %w", ns, err)
	}
	return nil
}

// removeEmptyCgroups removes root and the cgroups below it, children first. rmdir fails on
// a cgroup that still has processes, which is left alone.
func removeEmptyCgroups(root string) {
	var dirs []string
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for _, dir := range slices.Backward(dirs) {
		syscall.Rmdir(dir)
	}
}

// UnmountUnder detaches every mount at or below dir, deepest first: what staticpod
// leaves mounted under a root dir of its own (pinned namespaces, pods' tmpfs volumes)
// once it and its pods are gone.
func UnmountUnder(dir string) error { return unmountUnder(dir) }

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	points, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder returns the mount points at or below dir in this mount namespace, deepest
// first, as /proc/self/mountinfo lists them.
func mountsUnder(dir string) ([]string, error) {
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	var points []string
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPoint(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	slices.SortStableFunc(points, func(a, b string) int { return len(b) - len(a) })
	return points, nil
}

// unescapeMountPoint undoes mountinfo's octal escapes of space, tab, newline and backslash.
var unescapeMountPoint = strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace
