// Package logs owns the CRI log files of containers: the layout the kubelet uses under
// /var/log/pods and /var/log/containers, the writer that turns a container's stdout and
// stderr into CRI-format records (`<RFC3339Nano> stdout|stderr F|P <content>`) and
// rotates them, the configuration the log writer receives from containerd's binary://
// log driver and the log writer's body (RunShimLogger, which the helper program runs as
// `staticpod-helper logger`, and staticpod's hidden logger command too), and the reader
// that prints them back (tail, follow across rotation).
//
// It imports nothing of staticpod's, so that the runtime (which names log files) and the
// logger process and API (which write and read them) can all use it.
package logs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Layout and format constants. The names and formats are the kubelet's and containerd
// CRI's, so that log shippers configured for kubelet nodes read these files unchanged.
const (
	DefaultPodsDir       = "/var/log/pods"       // root of <namespace>_<name>_<uid>/<container>/<attempt>.log
	DefaultContainersDir = "/var/log/containers" // the kubelet's flat directory of symlinks

	DefaultMaxSize     = 10 << 20 // bytes before a log file is rotated (kubelet containerLogMaxSize)
	DefaultMaxFiles    = 5        // files kept per container, the current one included (containerLogMaxFiles)
	DefaultMaxLineSize = 16 << 10 // bytes of content per record before a line is split (CRI max-container-log-line-size)

	logSuffix = ".log"
	// rotatedTimeFormat is the suffix of a rotated file, <attempt>.log.<time>, as the
	// kubelet's container log manager names them. It has a resolution of one second.
	rotatedTimeFormat = "20060102-150405"
	// maxFileNameLen is ext4's limit; the kubelet cuts symlink names to fit it.
	maxFileNameLen = 255

	dirMode  = 0o755
	fileMode = 0o640 // as containerd CRI creates container logs
)

// PodDir returns the directory of a pod's logs: <root>/<namespace>_<name>_<uid>. It is
// always one entry of root: valid namespaces, names and UIDs hold no '/' (the caller
// checks them), and should one hold a '/' or a NUL all the same, it is written %2F or
// %00 ('%' itself %25), never followed.
func PodDir(root, namespace, name, uid string) string {
	return filepath.Join(root, pathPart.Replace(namespace+"_"+name+"_"+uid))
}

// pathPart escapes what would make a string more, or less, than one path element.
var pathPart = strings.NewReplacer("%", "%25", "/", "%2F", "\x00", "%00")

// ContainerPath returns the log file of one attempt (restart count) of a container:
// <root>/<namespace>_<name>_<uid>/<container>/<attempt>.log.
func ContainerPath(root, namespace, name, uid, container string, attempt int) string {
	return filepath.Join(PodDir(root, namespace, name, uid), container, strconv.Itoa(attempt)+logSuffix)
}

// SymlinkPath returns the kubelet's symlink for a container in containersDir:
// <pod>_<namespace>_<container>-<containerID>.log, its name cut to ext4's 255 bytes as
// the kubelet does.
func SymlinkPath(containersDir, pod, namespace, container, containerID string) string {
	name := pod + "_" + namespace + "_" + container + "-" + containerID
	if len(name) > maxFileNameLen-len(logSuffix) {
		name = name[:maxFileNameLen-len(logSuffix)]
	}
	return filepath.Join(containersDir, name+logSuffix)
}

// Rotated returns the rotated files of the log file path, oldest first. Their names,
// <path>.<20060102-150405>, sort in time order.
func Rotated(path string) ([]string, error) {
	matches, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return nil, fmt.Errorf("list rotated logs of %s: %w", path, err)
	}
	slices.Sort(matches)
	return matches, nil
}

// Remove deletes a container's log file, its rotated files and its symlink (empty for
// none). Files already gone are not an error.
func Remove(path, symlink string) error {
	rotated, err := Rotated(path)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range append(rotated, path, symlink) {
		if p == "" {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove log %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// linkAtomically points symlink at target, replacing whatever was there without a moment
// where the link is missing.
func linkAtomically(target, symlink string) error {
	if err := os.MkdirAll(filepath.Dir(symlink), dirMode); err != nil {
		return fmt.Errorf("create symlink directory for %s: %w", symlink, err)
	}
	tmp := symlink + ".tmp"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("create symlink %s: %w", symlink, err)
	}
	if err := os.Rename(tmp, symlink); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create symlink %s: %w", symlink, err)
	}
	return nil
}

// globEscape quotes the glob metacharacters of a literal path.
func globEscape(path string) string {
	var b strings.Builder
	for _, r := range path {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
