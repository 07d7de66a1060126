// Package results keeps, on disk, which pods finished for good and why staticpod
// failed one, so that a finished job does not run again after staticpod or the machine
// restarts. The runner marks and reads them; it imports nothing of staticpod's.
package results

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Store remembers which pods finished for good (Never and OnFailure pods whose
// containers will not run again, pods staticpod failed), and why staticpod failed a
// pod, on disk, so that a finished job does not run again after staticpod or the
// machine restarts, and a failed one still says why. A pod's result is forgotten when
// the pod is removed, so the same manifest written again runs again.
type Store struct {
	dir string // one file per finished pod UID, holding the reason it failed, if any; "" keeps results in memory only

	mu   sync.Mutex           // guards done
	done map[types.UID]string // cache of the files: pod UID -> reason
}

// New loads the results kept under dir (created if missing); "" keeps them in memory
// only.
func New(dir string) (*Store, error) {
	r := &Store{dir: dir, done: map[types.UID]string{}}
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
		uid, err := hex.DecodeString(e.Name())
		if err != nil {
			continue
		}
		// A reason that cannot be read is lost, not the result: the pod stays finished.
		reason, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		r.done[types.UID(uid)] = strings.TrimSpace(string(reason))
	}
	return r, nil
}

// Done reports whether the pod finished for good and, if staticpod failed it, why.
func (r *Store) Done(uid types.UID) (done bool, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reason, done = r.done[uid]
	return done, reason
}

// Mark records that the pod finished for good; reason, if not "", is why staticpod
// failed it.
func (r *Store) Mark(uid types.UID, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.done[uid]; ok {
		return
	}
	r.done[uid] = reason
	if r.dir != "" {
		// Best effort: losing the mark only means the job may run again after a crash.
		if f, err := os.OpenFile(r.file(uid), os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			f.WriteString(reason)
			f.Sync()
			f.Close()
		}
	}
}

// Forget drops the result of a pod that was removed.
func (r *Store) Forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.done, uid)
	if r.dir != "" {
		_ = os.Remove(r.file(uid)) // a stale mark is harmless: that UID comes back only with its manifest
	}
}

// file is where a pod's mark is kept. A UID given in a manifest may hold any character,
// so the name is its hex encoding.
func (r *Store) file(uid types.UID) string {
	return filepath.Join(r.dir, hex.EncodeToString([]byte(uid)))
}
