package devices

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/staticpod/staticpod/internal/atomicfile"
	"k8s.io/apimachinery/pkg/types"
)

// checkpointVersion is the layout of the checkpoint file; another is not read.
const checkpointVersion = 1

// Assignment is the devices of one resource given to one container, with what the
// plugin's Allocate answered: a restarted staticpod gives the container the same.
type Assignment struct {
	Pod        types.UID  `json:"pod"`
	Container  string     `json:"container"`
	Resource   string     `json:"resource"`
	DeviceIDs  []string   `json:"deviceIDs"`
	Allocation Allocation `json:"allocation"`
}

type checkpoint struct {
	Version     int          `json:"version"`
	Assignments []Assignment `json:"assignments"`
}

// readCheckpoint returns the assignments kept at path; none when there is no file.
func readCheckpoint(path string) ([]Assignment, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read device checkpoint: %w", err)
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("read device checkpoint %s: %w", path, err)
	}
	if c.Version != checkpointVersion {
		return nil, fmt.Errorf("read device checkpoint %s: version %d, want %d", path, c.Version, checkpointVersion)
	}
	return c.Assignments, nil
}

// writeCheckpoint replaces the file at path with the assignments, whole.
func writeCheckpoint(path string, as []Assignment) error {
	slices.SortFunc(as, func(a, b Assignment) int {
		if a.Pod != b.Pod {
			return compare(string(a.Pod), string(b.Pod))
		}
		if a.Container != b.Container {
			return compare(a.Container, b.Container)
		}
		return compare(a.Resource, b.Resource)
	})
	b, err := json.MarshalIndent(checkpoint{Version: checkpointVersion, Assignments: as}, "", "  ")
	if err != nil {
		return fmt.Errorf("write device checkpoint: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write device checkpoint: %w", err)
	}
	if err := atomicfile.WriteFileDurably(path, b, 0o600); err != nil {
		return fmt.Errorf("write device checkpoint: %w", err)
	}
	return nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
