package containerdrt

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/logs"
)

// containerLogLink is the kubelet-style /var/log/containers symlink of a container, or
// "" when no such directory is configured.
func containerLogLink(containersDir string, labels map[string]string, id string) string {
	if containersDir == "" {
		return ""
	}
	return logs.SymlinkPath(containersDir, labels[LabelPodName], labels[LabelPodNamespace], labels[LabelContainer], id)
}

// removePodLogs deletes the log directory of the pod with uid, whatever its namespace
// and name: <root>/*_*_<uid>.
func removePodLogs(root string, uid types.UID) error {
	dirs, err := filepath.Glob(filepath.Join(root, "*_*_"+string(uid)))
	if err != nil {
		return fmt.Errorf("find logs of pod %s: %w", uid, err)
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("remove logs of pod %s: %w", uid, err)
		}
	}
	return nil
}
