package poddir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

// RemoveLogs deletes the log directory of the pod with uid, whatever its namespace
// and name: <root>/<namespace>_<name>_<uid>. The directory is found by reading root,
// never by a glob: a UID is compared whole, as a string, so that no character of it
// can match another pod's directory. Namespaces and names hold no '_', nor do UIDs
// (manifests.CheckUID): the part after the second '_' is the UID.
func RemoveLogs(root string, uid types.UID) error {
	if err := manifests.CheckUID(uid); err != nil {
		return fmt.Errorf("remove pod logs: %w", err)
	}
	entries, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find logs of pod %s: %w", uid, err)
	}
	for _, e := range entries {
		parts := strings.SplitN(e.Name(), "_", 3)
		if len(parts) != 3 || parts[2] != string(uid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			return fmt.Errorf("remove logs of pod %s: %w", uid, err)
		}
	}
	return nil
}
