package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

// Defaults of the file source.
const (
	DefaultPeriod = 20 * time.Second      // full rescan, the safety net under fsnotify
	settle        = 25 * time.Millisecond // an editor's write-rename-chmod takes less
)

// Watcher is the directory source: it rescans the manifest path when fsnotify reports
// a change (after the burst settles: an editor's write-rename-chmod dance is one
// change) and every period, and sends a snapshot whenever what it wants changes.
//
// A file that is whole (closed after writing, or renamed into the directory: see
// completions) is scanned for at once, without waiting for the burst to settle: that
// is how most manifests arrive, and a pod starts that much sooner; so is a file
// deleted (rm), and its pods stop that much sooner. Such a quick scan is tentative: it
// sends only if nothing but those files changed and the whole ones hold no problem, so
// a file renamed away for a moment by an editor's save, or one caught half written,
// waits for the scan after the burst settles.
type Watcher struct {
	Path   string
	Node   string
	Period time.Duration // DefaultPeriod when 0
	Settle time.Duration // how long a burst of changes must be quiet before a scan; 25 ms when 0
	Log    *slog.Logger

	// Owned by Run.
	good     map[string][]*corev1.Pod // path -> pods of its last good read
	prints   map[string][]string      // path -> fingerprints of good's pods, in order
	goodObjs map[string]fileObjects   // path -> ConfigMaps and Secrets of its last good read
	reported map[string]string        // path -> problems last logged, to log on change only
	last     string                   // fingerprint of the last snapshot sent
	loads    *loads                   // what each file held at the last scan

	// Tests: called on Run's goroutine for every file event taken (its path; from
	// fsnotify or from completions, as source says; whether a burst is settling once it
	// is taken) and after every scan, so that a test can tell that the watcher has seen
	// a change and done what it would do about it.
	afterEvent func(source, path string, settling bool)
	afterScan  func()
}

// Sources of file events, for Watcher.afterEvent.
const (
	eventFsnotify   = "fsnotify"
	eventCompletion = "completion"
)

// Run watches until ctx is done and sends each new snapshot to emit. The first
// snapshot is sent at once, even when the path does not exist (an empty source is a
// ready source, as on the kubelet). It returns nil when ctx is done.
func (w *Watcher) Run(ctx context.Context, emit func(context.Context, manifests.Update) error) error {
	w.start()
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", w.Path, err)
	}
	defer fsw.Close()
	var whole <-chan completion
	comp, err := newCompletions()
	if err != nil {
		w.Log.Debug("no inotify for whole files; every change waits for its burst to settle", "err", err)
	} else {
		defer comp.Close()
		whole = comp.C
	}
	ticker := time.NewTicker(w.Period)
	defer ticker.Stop()
	var settleC <-chan time.Time
	// Whole (true) and deleted (false) files since the last scan that was taken;
	// quick makes the next scan a quick one.
	wholeSince, quick := map[string]bool{}, false
	for {
		w.watch(fsw)
		if comp != nil {
			comp.watch(w.Path)
		}
		scanned := wholeSince
		if !quick {
			scanned = nil
		}
		taken, err := w.scan(ctx, emit, scanned)
		if err != nil {
			return nil // ctx done while sending
		}
		if w.afterScan != nil {
			w.afterScan()
		}
		if taken {
			wholeSince = map[string]bool{}
		}
		quick = false
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return nil
			case ev := <-fsw.Events:
				if w.relevant(ev.Name) {
					settleC = time.After(w.Settle)
				}
				w.tookEvent(eventFsnotify, ev.Name, settleC != nil)
			case c := <-whole:
				// Every file completed while the last scan ran is taken by one scan: a
				// burst of n files costs as many scans as the watcher falls behind, not n.
				for more := true; more; {
					name := filepath.Join(filepath.Clean(w.Path), c.name)
					if w.relevant(name) {
						wholeSince[name] = !c.gone
						quick, waiting = true, false
					}
					w.tookEvent(eventCompletion, name, settleC != nil)
					select {
					case c = <-whole:
					default:
						more = false
					}
				}
			case err := <-fsw.Errors:
				w.Log.Warn("file watch error; the periodic rescan goes on", "path", w.Path, "err", err)
			case <-settleC:
				settleC, waiting = nil, false
			case <-ticker.C:
				waiting = false
			}
		}
	}
}

// start sets the defaults and forgets what earlier scans took.
func (w *Watcher) start() {
	if w.Period == 0 {
		w.Period = DefaultPeriod
	}
	if w.Settle == 0 {
		w.Settle = settle
	}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	w.good, w.prints, w.goodObjs, w.reported, w.last = map[string][]*corev1.Pod{}, map[string][]string{}, map[string]fileObjects{}, map[string]string{}, "\x00"
	w.loads = newLoads(w.Node)
}

// tookEvent tells a test's afterEvent of an event taken.
func (w *Watcher) tookEvent(source, path string, settling bool) {
	if w.afterEvent != nil {
		w.afterEvent(source, path, settling)
	}
}

// watch (re)adds the watches: on the path's parent, to see the path itself created,
// removed or renamed onto, and on the path when it is a directory. fsnotify drops the
// watch of a directory that is removed; the next scan after its return adds it again.
func (w *Watcher) watch(fsw *fsnotify.Watcher) {
	parent := filepath.Dir(filepath.Clean(w.Path))
	for _, dir := range []string{parent, w.Path} {
		if info, err := os.Stat(dir); err == nil && info.IsDir() && !watching(fsw, dir) {
			if err := fsw.Add(dir); err != nil {
				w.Log.Warn("cannot watch; relying on the periodic rescan", "path", dir, "err", err)
			}
		}
	}
}

func watching(fsw *fsnotify.Watcher, dir string) bool {
	for _, d := range fsw.WatchList() {
		if d == dir {
			return true
		}
	}
	return false
}

// relevant reports whether an event on name can change the snapshot: anything in the
// manifest directory that is not ignored, or the path itself.
func (w *Watcher) relevant(name string) bool {
	clean := filepath.Clean(w.Path)
	if name == clean {
		return true
	}
	return filepath.Dir(name) == clean && !Ignored(name)
}

// scan reads the path and sends a snapshot if it differs from the last one sent. A
// quick scan (see Watcher; whole names the whole files) is taken only if nothing but
// those files changed; it reports whether it was. An error means ctx ended.
func (w *Watcher) scan(ctx context.Context, emit func(context.Context, manifests.Update) error, whole map[string]bool) (taken bool, _ error) {
	snap, err := scan([]string{w.Path}, w.Node, w.loads)
	if whole != nil && (err != nil || !w.onlyWholeChanged(snap, whole)) {
		return false, nil // the scan after the burst settles decides
	}
	if err != nil {
		// The path cannot be listed (permissions, say): keep the last good snapshot.
		w.report(w.Path, []string{err.Error()})
		return true, nil
	}
	// A file that fails to read or validate keeps its last good pods in the snapshot,
	// and is listed in its failures.
	u := manifests.Update{Source: manifests.SourceFile, Objects: manifests.NewObjects()}
	var prints []string // of u.Pods, for the snapshot's fingerprint
	present := map[string]bool{}
	problems := problemsByFile(snap)
	for _, f := range snap.Files {
		present[f.Path] = true
		problems := problems[f.Path]
		w.report(f.Path, problems)
		if f.Failed() {
			kept := w.good[f.Path]
			u.Pods = append(u.Pods, kept...)
			prints = append(prints, w.prints[f.Path]...)
			objs := w.goodObjs[f.Path]
			u.Objects.Add(objs.configMaps, objs.secrets)
			u.Objects.AddRuntimeClasses(objs.classes)
			u.Failures = append(u.Failures, manifests.Failure{Location: f.Path, Problems: problems, Invalid: true, Kept: uidsOf(kept)})
			continue
		}
		if len(problems) > 0 { // pods that another file defines first: reported, not run
			u.Failures = append(u.Failures, manifests.Failure{Location: f.Path, Problems: problems, Invalid: true})
		}
		w.good[f.Path] = f.Result.Pods
		w.prints[f.Path] = f.podPrintsOf()
		w.goodObjs[f.Path] = objectsOf(f)
		u.Pods = append(u.Pods, f.Result.Pods...)
		prints = append(prints, w.prints[f.Path]...)
		u.Objects.Add(f.Result.ConfigMaps, f.Result.Secrets)
		u.Objects.AddRuntimeClasses(f.Result.RuntimeClasses)
	}
	for path := range w.good {
		if !present[path] {
			delete(w.good, path) // a file removed removes its pods and objects
			delete(w.prints, path)
			delete(w.goodObjs, path)
			w.report(path, nil)
		}
	}
	fp := fingerprint(u, prints)
	if fp == w.last {
		return true, nil
	}
	if err := emit(ctx, u); err != nil {
		return true, err
	}
	w.last = fp
	return true, nil
}

// onlyWholeChanged reports whether snap differs from what was last taken in only the
// whole files, which hold no problem: no other file appeared, went or changed.
func (w *Watcher) onlyWholeChanged(snap Snapshot, whole map[string]bool) bool {
	problems := problemsByFile(snap)
	present := map[string]bool{}
	for _, f := range snap.Files {
		present[f.Path] = true
		trouble := strings.Join(problems[f.Path], "\n")
		switch {
		case whole[f.Path]:
			if trouble != "" {
				return false
			}
		case trouble != w.reported[f.Path]:
			return false // a file that is not whole broke, or recovered
		case trouble == "" && !samePods(f, w.prints[f.Path]):
			return false // changed, or appeared, without being whole yet
		case trouble == "" && objectsOf(f).fingerprint != w.goodObjs[f.Path].fingerprint:
			return false
		}
	}
	for path := range w.good {
		if wasWhole, deleted := whole[path]; !present[path] && (!deleted || wasWhole) {
			return false // went without being deleted: renamed away, maybe for a moment
		}
	}
	return true
}

// samePods reports whether the file holds the pods whose fingerprints are prints, in
// order: by content (never by UID alone: a manifest may give its UID, which then stays
// while the spec changes).
func samePods(f File, prints []string) bool {
	if len(f.Result.Pods) != len(prints) {
		return false
	}
	for i, pod := range f.Result.Pods {
		if f.print(pod) != prints[i] {
			return false
		}
	}
	return true
}

// problemsByFile lists the problems of each file of snap: its own, and the conflicts
// that dropped its pods.
func problemsByFile(snap Snapshot) map[string][]string {
	out := map[string][]string{}
	for _, f := range snap.Files {
		out[f.Path] = problemsOf(f)
	}
	for _, c := range snap.Conflicts {
		out[c.Dropped] = append(out[c.Dropped], c.Error())
	}
	return out
}

func problemsOf(f File) []string {
	var out []string
	if f.ReadErr != nil {
		out = append(out, f.ReadErr.Error())
	}
	return append(out, manifests.Messages(f.Result.Errors)...)
}

// report logs a file's problems when they change, and its recovery.
func (w *Watcher) report(path string, problems []string) {
	now := strings.Join(problems, "\n")
	if w.reported[path] == now {
		return
	}
	if now == "" {
		w.Log.Info("manifest is valid again", "source", "file", "path", path)
		delete(w.reported, path)
		return
	}
	w.reported[path] = now
	for _, p := range problems {
		w.Log.Warn("invalid manifest; its pods keep their last good spec", "source", "file", "path", path, "err", p)
	}
}

// fileObjects are the ConfigMaps, Secrets and RuntimeClasses of one file's last good read.
type fileObjects struct {
	configMaps  []*corev1.ConfigMap
	secrets     []*corev1.Secret
	classes     []*nodev1.RuntimeClass
	fingerprint string
}

func objectsOf(f File) fileObjects {
	fp := f.objects
	if !f.objectsKnown {
		fp = objectsPrint(f.Result)
	}
	return fileObjects{configMaps: f.Result.ConfigMaps, secrets: f.Result.Secrets, classes: f.Result.RuntimeClasses, fingerprint: fp}
}

// objectPrints counts the files whose objects were fingerprinted (objectsPrint), for
// tests.
var objectPrints atomic.Int64

// objectsPrint is the fingerprint of the result's own objects, counted.
func objectsPrint(r manifests.Result) string {
	objectPrints.Add(1)
	return r.Objects().Fingerprint()
}

// podPrints counts the pods fingerprinted (podPrint), for tests: marshalling and
// hashing a pod is most of what a scan costs.
var podPrints atomic.Int64

// podPrint is manifests.Fingerprint, counted.
func podPrint(pod *corev1.Pod) string {
	podPrints.Add(1)
	return manifests.Fingerprint(pod)
}

func uidsOf(pods []*corev1.Pod) []types.UID {
	out := make([]types.UID, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.UID)
	}
	return out
}

// fingerprint identifies a snapshot: its pods' contents (prints, their fingerprints:
// see samePods), its objects and its failures.
func fingerprint(u manifests.Update, prints []string) string {
	parts := append([]string{"objects " + u.Objects.Fingerprint()}, prints...)
	sort.Strings(parts)
	for _, f := range u.Failures {
		parts = append(parts, "!"+f.Location+"\n"+strings.Join(f.Problems, "\n"))
	}
	return strings.Join(parts, "\x00")
}
