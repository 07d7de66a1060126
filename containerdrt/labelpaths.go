package containerdrt

import (
	"path/filepath"
	"strings"

	"github.com/staticpod/staticpod/logs"
)

// Paths staticpod keeps in labels are files it removes, reads into a pod's status and
// unmounts when the container goes. Labels are whatever anyone with access to
// containerd's socket wrote: a container made by hand in staticpod's namespace, or one
// whose labels were edited, must not have staticpod remove, unmount or disclose
// anything outside the directories staticpod owns. So each path is honoured only
// inside its own directory, and is "" otherwise, as for a container without one.

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
