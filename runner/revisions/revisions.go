// Package revisions keeps, under the root dir, the last revision of each pod that was
// Ready, and decides when a newer revision that is not Ready within its progress
// deadline (staticpod.io/progress-deadline-seconds, or --progress-deadline) is rolled
// back to it. A pod's revision is its UID: the hash of its content as its source gave
// it. The runner's sync loop owns a Store: it shows the Store every status its workers
// publish (Observe), and runs what Substitute makes of every merge of the sources.
//
// It imports manifests (a pod's namespace/name) and internal/atomicfile (its files
// are written whole and durably), and nothing else of staticpod's.
package revisions

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/staticpod/staticpod/internal/atomicfile"
	"github.com/staticpod/staticpod/manifests"
)

// ReasonRolledBack is the reason of the event that tells a rollback.
const ReasonRolledBack = "RolledBack"

// Rollback is a pod's name rolled back from the revision its source asks for to the
// last revision of it that was Ready. It lasts until the source asks for another
// revision.
type Rollback struct {
	Pod    string    `json:"pod"`    // namespace/name
	From   types.UID `json:"from"`   // the source's revision, which was not Ready
	To     types.UID `json:"to"`     // the kept revision that runs instead
	Reason string    `json:"reason"` // why: "failed", "not Ready within 5s of its containers starting"
	At     time.Time `json:"at"`
}

// Message tells the rollback in an event.
func (rb Rollback) Message() string {
	return fmt.Sprintf("revision %s %s: rolled back to revision %s, the last that was Ready; it runs until the manifest changes",
		Short(rb.From), rb.Reason, Short(rb.To))
}

// Short is a revision as messages name it: the first 12 characters of its UID.
func Short(uid types.UID) string {
	if len(uid) > 12 {
		return string(uid[:12])
	}
	return string(uid)
}

// record is what the Store keeps of one pod name, one file per name.
type record struct {
	Ready      *corev1.Pod `json:"ready,omitempty"`      // the last revision that was Ready, as its source gave it
	RolledBack *Rollback   `json:"rolledBack,omitempty"` // set while the name runs Ready instead of what its source asks
}

// Options configure a Store.
type Options struct {
	Dir      string                // where the records are kept (created if missing); "" keeps them in memory only
	Deadline time.Duration         // the progress deadline of pods without the annotation; 0: none
	Now      func() time.Time      // the clock; time.Now when nil
	Registry prometheus.Registerer // where the rollback counter goes; nil for none
	Log      *slog.Logger          // discarded when nil
}

// Store keeps the pods' Ready revisions and rollbacks. It is used by one goroutine
// (the sync loop) and has no lock.
type Store struct {
	opts      Options
	rollbacks prometheus.Counter

	names   map[string]*record      // by namespace/name
	running map[string]*corev1.Pod  // the pod a rolled-back name runs instead (Substitute), one per rollback
	started map[types.UID]time.Time // the earliest start of a revision's containers seen
}

// Open loads the records kept under opts.Dir. A file that cannot be read or decoded is
// ignored: it names no revision to go back to.
func Open(opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Deadline < 0 {
		return nil, fmt.Errorf("revisions: progress deadline %s is below 0", opts.Deadline)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	s := &Store{opts: opts, names: map[string]*record{}, running: map[string]*corev1.Pod{}, started: map[types.UID]time.Time{},
		rollbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "staticpod_pod_rollbacks_total",
			Help: "Pod revisions not Ready within their progress deadline, rolled back to the last revision that was.",
		})}
	if opts.Registry != nil {
		if err := opts.Registry.Register(s.rollbacks); err != nil {
			return nil, fmt.Errorf("revisions: %w", err)
		}
	}
	if opts.Dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(opts.Dir, e.Name()))
		rec := &record{}
		if err != nil || json.Unmarshal(data, rec) != nil || rec.Ready == nil || fileName(manifests.Key(rec.Ready)) != e.Name() {
			continue
		}
		if rec.RolledBack != nil && rec.RolledBack.To != rec.Ready.UID {
			rec.RolledBack = nil // names no revision kept: nothing to run instead
		}
		s.names[manifests.Key(rec.Ready)] = rec
	}
	return s, nil
}

// fileName is the file of a pod name: namespace_name.json. Namespaces and names are DNS
// labels and subdomains (manifests validates them), which hold no "_" and no "/"; any
// other key has no file.
func fileName(key string) string {
	ns, name, ok := strings.Cut(key, "/")
	if !ok || ns == "" || name == "" || strings.ContainsAny(key, `_\`) || strings.Contains(name, "/") || strings.HasPrefix(ns, ".") {
		return ""
	}
	return ns + "_" + name + ".json"
}

// save writes rec as the record of key, before the Store acts on it: a kill -9 of
// staticpod right after finds it. A rollback is synced to the disk, for the machine's
// crash too: the revision it left must not come back. A Ready revision is not: the
// loop saves one for every pod that becomes Ready, a sync costs it a wait on the disk
// each (many at a boot), and what a crash of the machine can lose is only the last
// revision to go back to, which the pod's next Ready status saves again.
func (s *Store) save(key string, rec *record) error {
	if s.opts.Dir != "" {
		name := fileName(key)
		if name == "" {
			return fmt.Errorf("keep revision of %s: not a pod name", key)
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("keep revision of %s: %w", key, err)
		}
		write := atomicfile.WriteFile
		if rec.RolledBack != nil {
			write = atomicfile.WriteFileDurably
		}
		if err := write(filepath.Join(s.opts.Dir, name), data, 0o600); err != nil {
			return fmt.Errorf("keep revision of %s: %w", key, err)
		}
	}
	s.names[key] = rec
	return nil
}

// Deadline is pod's progress deadline: its annotation's seconds, else the Store's
// default; 0 for none. A value that is not a whole number above 0 sets none
// (manifests refuses such a manifest).
func (s *Store) Deadline(pod *corev1.Pod) time.Duration {
	v, ok := pod.Annotations[manifests.AnnotationProgressDeadline]
	if !ok {
		return s.opts.Deadline
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// Substitute returns desired with the pod of each rolled-back name replaced by the
// revision it was rolled back to, annotated with what its source asks for and why it
// does not run. A name whose source now asks for another revision than the one rolled
// back from is rolled back no more: that revision runs. desired itself is left as it
// is; it is returned when nothing is replaced.
func (s *Store) Substitute(desired map[types.UID]*corev1.Pod) map[types.UID]*corev1.Pod {
	if s == nil {
		return desired
	}
	var out map[types.UID]*corev1.Pod
	for uid, pod := range desired {
		key := manifests.Key(pod)
		rec := s.names[key]
		if rec == nil || rec.RolledBack == nil {
			continue
		}
		if rec.RolledBack.From != uid {
			// Edited again: best effort, for a record left behind names a revision no
			// source asks for, which ends it here again.
			_ = s.save(key, &record{Ready: rec.Ready})
			delete(s.running, key)
			continue
		}
		if _, taken := desired[rec.RolledBack.To]; taken {
			continue
		}
		if out == nil {
			out = maps.Clone(desired)
		}
		delete(out, uid)
		out[rec.RolledBack.To] = s.runningPod(key, rec)
	}
	if out == nil {
		return desired
	}
	return out
}

// runningPod is the pod a rolled-back name runs: its kept revision, annotated; the same
// pointer for as long as the rollback lasts, as the loop compares pods by pointer.
func (s *Store) runningPod(key string, rec *record) *corev1.Pod {
	if pod := s.running[key]; pod != nil {
		return pod
	}
	pod := rec.Ready.DeepCopy()
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[manifests.AnnotationRolledBackFrom] = string(rec.RolledBack.From)
	pod.Annotations[manifests.AnnotationRollbackReason] = rec.RolledBack.Reason
	s.running[key] = pod
	return pod
}

// Gone forgets what the Store keeps of the name of pod, a pod just removed, when no pod
// of desired (the sources' merge) has that name: a pod of the name written later starts
// with no revision to go back to, and no rollback. A pod replaced by another revision
// keeps its name's record. It does nothing for a nil pod (an orphan's).
func (s *Store) Gone(pod *corev1.Pod, desired map[types.UID]*corev1.Pod) {
	if s == nil || pod == nil || s.names[manifests.Key(pod)] == nil {
		return
	}
	key := manifests.Key(pod)
	for _, p := range desired {
		if manifests.Key(p) == key {
			return
		}
	}
	if name := fileName(key); s.opts.Dir != "" && name != "" {
		if err := os.Remove(filepath.Join(s.opts.Dir, name)); err != nil && !os.IsNotExist(err) {
			s.opts.Log.Warn("forget pod revision", "pod", key, "err", err)
			return // kept whole: the next removal of the name tries again
		}
	}
	delete(s.names, key)
	delete(s.running, key)
}

// RolledBack returns the rollback of a pod name, if it is rolled back.
func (s *Store) RolledBack(key string) (Rollback, bool) {
	if s == nil || s.names[key] == nil || s.names[key].RolledBack == nil {
		return Rollback{}, false
	}
	return *s.names[key].RolledBack, true
}

// Kept returns the last revision of a pod name that was Ready, as its source gave it.
func (s *Store) Kept(key string) (*corev1.Pod, bool) {
	if s == nil || s.names[key] == nil {
		return nil, false
	}
	return s.names[key].Ready.DeepCopy(), true
}
