package containerdrt

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
)

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
