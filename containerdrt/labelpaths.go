package containerdrt

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/logs"
	"github.com/staticpod/staticpod/manifests"
)

// Paths staticpod keeps in labels are files it removes, reads into a pod's status and
// unmounts when the container goes. Labels are whatever anyone with access to
// containerd's socket wrote: a container made by hand in staticpod's namespace, or one
// whose labels were edited, must not have staticpod remove, unmount or disclose
// anything outside the directories staticpod owns. So each path is honoured only
// inside its own directory, and is "" otherwise, as for a container without one.

// The pod's UID (LabelPodUID) names its directory, log directory and cgroup, which
// staticpod removes with the pod: a container whose UID label is not a plain token
// (manifests.CheckUID) is not staticpod's, whatever its other labels say. List leaves
// it out, so that no path is ever built from it, and warns once.

// podUIDOf is the pod UID of a container's labels, or an error when it is not a plain
// token.
func podUIDOf(labels map[string]string) (types.UID, error) {
	uid := types.UID(labels[LabelPodUID])
	if err := manifests.CheckUID(uid); err != nil {
		return "", fmt.Errorf("label %s: %w", LabelPodUID, err)
	}
	return uid, nil
}

// forgedUIDs remembers the containers List ignored for their UID label, so that each is
// warned about once, not at every relist.
type forgedUIDs struct {
	mu   sync.Mutex      // guards seen
	seen map[string]bool // container IDs
}

// warn logs, the first time it meets container id, that it is ignored for err.
func (f *forgedUIDs) warn(log *slog.Logger, id string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen[id] {
		return
	}
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	f.seen[id] = true
	log.Warn("container ignored: its pod UID label is not one staticpod gives; nothing of it is touched", "id", id, "err", err)
}

// logPathOf is the container's CRI log file (LabelLogPath), under the pod log dir.
func (r *Runtime) logPathOf(labels map[string]string) string {
	return inside(r.cfg.PodLogDir, labels[LabelLogPath])
}

// terminationPathOf is the host file of the container's termination log
// (LabelTermination), under the run dir's pod directories (or the root dir's, where
// an earlier staticpod made it).
func (r *Runtime) terminationPathOf(labels map[string]string) string {
	return insideAny(labels[LabelTermination], filepath.Join(r.cfg.RunDir, podsDir), filepath.Join(r.cfg.RootDir, podsDir))
}

// pinsOf is the directory of a pinned sandbox's namespaces (labelPinned), under the
// run dir's pin directories (or the root dir's, where an earlier staticpod pinned it).
func (r *Runtime) pinsOf(labels map[string]string) string {
	return insideAny(labels[labelPinned], r.pinDirs()...)
}

// insideAny is p when it is inside one of dirs (see inside), else "".
func insideAny(p string, dirs ...string) string {
	for _, dir := range dirs {
		if inside(dir, p) != "" {
			return p
		}
	}
	return ""
}

// logLinkOf is the kubelet-style symlink to the container's log, in the containers
// log dir; "" when there is none or the names in the labels would put it elsewhere.
func (r *Runtime) logLinkOf(labels map[string]string, id string) string {
	dir := r.cfg.Log.ContainersDir
	if dir == "" {
		return ""
	}
	link := logs.SymlinkPath(dir, labels[LabelPodName], labels[LabelPodNamespace], labels[LabelContainer], id)
	if filepath.Dir(link) != filepath.Clean(dir) {
		return "" // a name holding a slash
	}
	return link
}

// inside returns p when it is an absolute, clean path strictly below dir, else "".
func inside(dir, p string) string {
	if dir == "" || p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0) {
		return ""
	}
	rel, err := filepath.Rel(filepath.Clean(dir), p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return ""
	}
	return p
}
