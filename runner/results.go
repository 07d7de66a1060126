package runner

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Results remembers which pods finished for good (Never and OnFailure pods whose
// containers will not run again), on disk, so that a finished job does not run again
// after staticpod or the machine restarts. A pod's result is forgotten when the pod is
// removed, so the same manifest written again runs again.
type Results struct {
	dir string // one empty file per finished pod UID; "" keeps results in memory only

	mu   sync.Mutex         // guards done
	done map[types.UID]bool // cache of the files
}

// NewResults loads the results kept under dir (created if missing).
func NewResults(dir string) (*Results, error) {
	r := &Results{dir: dir, done: map[types.UID]bool{}}
	if dir == "" {
		return r, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	for _, e := range entries {
		if uid, err := hex.DecodeString(e.Name()); err == nil {
			r.done[types.UID(uid)] = true
		}
	}
	return r, nil
}

// Done reports whether the pod finished for good.
func (r *Results) Done(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done[uid]
}

// Mark records that the pod finished for good.
func (r *Results) Mark(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done[uid] {
		return
	}
	r.done[uid] = true
	if r.dir != "" {
		// Best effort: losing the mark only means the job may run again after a crash.
		if f, err := os.OpenFile(r.file(uid), os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			f.Sync()
			f.Close()
		}
	}
}

// Forget drops the result of a pod that was removed.
func (r *Results) Forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.done, uid)
	if r.dir != "" {
		_ = os.Remove(r.file(uid)) // a stale mark is harmless: that UID comes back only with its manifest
	}
}

// file is where a pod's mark is kept. A UID given in a manifest may hold any character,
// so the name is its hex encoding.
func (r *Results) file(uid types.UID) string {
	return filepath.Join(r.dir, hex.EncodeToString([]byte(uid)))
}
