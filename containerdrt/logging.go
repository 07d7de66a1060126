package containerdrt

import (
	"fmt"

	"github.com/containerd/containerd/v2/pkg/cio"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/logs"
)

// Container logs are owned by the shim (DESIGN.md, decision 4): a task's stdout and
// stderr go through containerd's binary:// log URI to `staticpod logger`, which the shim
// starts and which writes the CRI log file. Nothing of the container's output passes
// through this process, so a restart of staticpod never blocks a container on a pipe.
//
// containerdrt uses the leaf package logs, which imports nothing of staticpod's, for the
// file layout and the logger's configuration.

// LogConfig is the rotation of container logs and where their kubelet-style symlinks go.
type LogConfig struct {
	MaxSize       int64  // bytes before a log file is rotated; 0 for logs.DefaultMaxSize, negative never
	MaxFiles      int    // files kept per container, the current one included; 0 for logs.DefaultMaxFiles
	ContainersDir string // directory of <pod>_<namespace>_<container>-<id>.log symlinks; "" for none
}

// logFilePath is the CRI log file of one attempt of a container of pod:
// <logRoot>/<namespace>_<name>_<uid>/<container>/<attempt>.log.
func logFilePath(logRoot string, pod *corev1.Pod, container string, attempt int) string {
	return logs.ContainerPath(logRoot, pod.Namespace, pod.Name, string(pod.UID), container, attempt)
}

// logCreator returns the task IO that makes the shim run binary (staticpod) as the
// container's logger, writing path and linking symlink (empty for none) to it.
//
// Before the task is created it makes the log's directory and the file itself, so that a
// log that cannot be written fails the task's creation here: the shim of containerd 1.x
// would otherwise start the container even though its logger exited at once.
func logCreator(binary string, cfg LogConfig, path, symlink string) cio.Creator {
	lc := logs.Config{Path: path, Symlink: symlink, MaxSize: cfg.MaxSize, MaxFiles: cfg.MaxFiles}
	binaryIO := cio.BinaryIO(binary, lc.Query())
	return func(id string) (cio.IO, error) {
		if err := lc.Prepare(); err != nil {
			return nil, fmt.Errorf("container log of %s: %w", id, err)
		}
		return binaryIO(id)
	}
}
