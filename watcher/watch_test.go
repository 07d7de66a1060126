package watcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/staticpod/staticpod/manifests"
)

// runWatcher runs a Watcher on path and returns a channel of its snapshots.
func runWatcher(t *testing.T, path string, period time.Duration) <-chan manifests.Update {
	t.Helper()
	updates, _ := startWatcher(t, &Watcher{Path: path, Node: "n", Period: period})
	return updates
}

// startWatcher runs w until the test ends and returns a channel of its snapshots, and a
// probe of what it does.
func startWatcher(t *testing.T, w *Watcher) (<-chan manifests.Update, *probe) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan manifests.Update, 16)
	p := &probe{dir: w.Path, settles: w.Settle < time.Minute, events: make(chan probed, 10000), scans: make(chan struct{}, 10000)}
	w.afterEvent = func(source, path string, settling bool) {
		select {
		case p.events <- probed{source, path, settling}:
		default:
		}
	}
	w.afterScan = func() {
		select {
		case p.scans <- struct{}{}:
		default:
		}
	}
	done := make(chan error)
	go func() {
		done <- w.Run(ctx, func(ctx context.Context, u manifests.Update) error {
			select {
			case updates <- u:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil on cancel", err)
		}
	})
	return updates, p
}

// probe follows a running Watcher through its test hooks: the file events it took and
// its scans.
type probe struct {
	dir     string // the watched directory
	settles bool   // its bursts settle within the test (else only quick scans send)
	events  chan probed
	scans   chan struct{}
	marks   int // marker files written
}

// probed is a file event the watcher took.
type probed struct {
	source, path string
	settling     bool // a burst was settling once it was taken
}

// awaitUpdate returns the next snapshot, failing after a deadline.
func awaitUpdate(t *testing.T, updates <-chan manifests.Update, what string) manifests.Update {
	t.Helper()
	select {
	case u := <-updates:
		return u
	case <-time.After(10 * time.Second):
		t.Fatalf("no snapshot after %s", what)
		return manifests.Update{}
	}
}

// noUpdate asserts that the changes made so far send no snapshot. It proves that the
// watcher has taken them all, and done what it would do about them, rather than
// waiting a while: it writes an ignored marker file and waits until the watcher has
// taken the marker's events (fsnotify's and the completion's, each stream in order,
// so every earlier event was taken before, and every quick scan they caused is done),
// then, if a burst was settling and the watcher's bursts settle, for the scan after
// it. Anything those scans meant to send has been sent by then.
func noUpdate(t *testing.T, updates <-chan manifests.Update, p *probe, what string) {
	t.Helper()
	p.marks++
	mark := filepath.Join(p.dir, fmt.Sprintf(".nothing-happened-%d", p.marks))
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	seen, settling := map[string]bool{}, false
	for !seen[eventFsnotify] || !seen[eventCompletion] {
		select {
		case e := <-p.events:
			if e.path == mark {
				seen[e.source], settling = true, e.settling
			}
		case <-deadline:
			t.Fatalf("the watcher did not take the events of %s within 10s (saw %v)", mark, seen)
		}
	}
	if settling && p.settles {
		for drained := false; !drained; {
			select {
			case <-p.scans:
			default:
				drained = true
			}
		}
		select {
		case <-p.scans:
		case <-deadline:
			t.Fatalf("the watcher did not scan after the burst of %s settled", what)
		}
	}
	select {
	case u := <-updates:
		t.Fatalf("unexpected snapshot after %s: %v", what, names(u))
	default:
	}
}

func names(u manifests.Update) []string {
	var out []string
	for _, p := range u.Pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// saveAtomically writes content the way editors do: to a temp file, then rename.
func saveAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".swp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func pod(name, image string) string {
	return strings.NewReplacer("NAME", name, "IMAGE", image).Replace("apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec: {containers: [{name: c, image: IMAGE}]}\n")
}

func TestWatcherFollowsTheDirectory(t *testing.T) {
	dir := writeFiles(t, map[string]string{"web.yaml": pod("web", "busybox:1")})
	updates, p := startWatcher(t, &Watcher{Path: dir, Node: "n", Period: time.Hour})
	first := awaitUpdate(t, updates, "start")
	if got := names(first); len(got) != 1 || got[0] != "web-n" {
		t.Fatalf("first snapshot = %v, want web-n", got)
	}

	saveAtomically(t, filepath.Join(dir, "web.yaml"), pod("web", "busybox:2"))
	edited := awaitUpdate(t, updates, "an atomic save")
	if edited.Pods[0].UID == first.Pods[0].UID || edited.Pods[0].Spec.Containers[0].Image != "busybox:2" {
		t.Fatalf("after the edit: %+v, want a new UID with the new image", edited.Pods[0].Spec.Containers)
	}

	for _, junk := range []string{"web.yaml.swp", "web.yaml~", ".hidden.yaml", "4913"} {
		if err := os.WriteFile(filepath.Join(dir, junk), []byte(pod("junk", "x")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	noUpdate(t, updates, p, "swap and backup files")

	saveAtomically(t, filepath.Join(dir, "web.yaml"), strings.Replace(pod("web", "busybox:3"), "containers:", "containerz:", 1))
	broken := awaitUpdate(t, updates, "a broken edit")
	if len(broken.Pods) != 1 || broken.Pods[0].UID != edited.Pods[0].UID || len(broken.Failures) != 1 {
		t.Fatalf("after a broken edit: pods %v failures %+v; want the last good pod kept and the failure reported", names(broken), broken.Failures)
	}
	if f := broken.Failures[0]; broken.Source != manifests.SourceFile || !f.Invalid || !strings.Contains(strings.Join(f.Problems, "\n"), "spec.containers: Required value") || len(f.Kept) != 1 {
		t.Errorf("failure = %+v, want the field path and the kept pod", f)
	}

	saveAtomically(t, filepath.Join(dir, "web.yaml"), pod("web", "busybox:4"))
	fixed := awaitUpdate(t, updates, "the fix")
	if len(fixed.Failures) != 0 || fixed.Pods[0].Spec.Containers[0].Image != "busybox:4" {
		t.Fatalf("after the fix: %v %+v", names(fixed), fixed.Failures)
	}

	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	if gone := awaitUpdate(t, updates, "a removal"); len(gone.Pods) != 0 {
		t.Fatalf("after removing the file: %v, want no pods", names(gone))
	}
}

func TestWatcherSurvivesTheDirectoryComingAndGoing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	updates := runWatcher(t, dir, time.Hour)
	if u := awaitUpdate(t, updates, "start on a missing path"); len(u.Pods) != 0 {
		t.Fatalf("missing path gave %v, want an empty snapshot", names(u))
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// No wait needed: the directory's watch is added before the rescan its creation
	// triggers, so a file written before the watch is found by that rescan.
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(pod("a", "x:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if u := awaitUpdate(t, updates, "a file in the new directory"); len(u.Pods) != 1 {
		t.Fatalf("got %v, want a-n", names(u))
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if u := awaitUpdate(t, updates, "the directory removed"); len(u.Pods) != 0 {
		t.Fatalf("got %v after removing the directory, want none", names(u))
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(pod("b", "x:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if u := awaitUpdate(t, updates, "a file in the recreated directory"); len(u.Pods) != 1 || u.Pods[0].Name != "b-n" {
		t.Fatalf("got %v, want b-n", names(u))
	}
}

func TestWatcherPeriodicRescan(t *testing.T) {
	dir := writeFiles(t, nil)
	updates := runWatcher(t, filepath.Join(dir, "one.yaml"), 200*time.Millisecond)
	awaitUpdate(t, updates, "start")
	// A file path source: its parent directory is watched too, but the rescan alone
	// would also find it.
	if err := os.WriteFile(filepath.Join(dir, "one.yaml"), []byte(pod("one", "x:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if u := awaitUpdate(t, updates, "writing the watched file"); len(u.Pods) != 1 {
		t.Fatalf("got %v, want one-n", names(u))
	}
}

// runQuickWatcher runs a Watcher whose bursts never settle: only its quick scans of
// whole files send anything after the first snapshot.
func runQuickWatcher(t *testing.T, dir string) (<-chan manifests.Update, *probe) {
	t.Helper()
	updates, p := startWatcher(t, &Watcher{Path: dir, Node: "n", Period: time.Hour, Settle: time.Hour})
	awaitUpdate(t, updates, "start")
	return updates, p
}

// A file renamed into place, or written and closed, is sent at once, before its burst
// of events settles.
func TestWatcherSendsWholeFilesAtOnce(t *testing.T) {
	dir := t.TempDir()
	updates, _ := runQuickWatcher(t, dir)
	saveAtomically(t, filepath.Join(dir, "web.yaml"), pod("web", "busybox:1"))
	if got := names(awaitUpdate(t, updates, "a rename into place")); len(got) != 1 || got[0] != "web-n" {
		t.Fatalf("after a rename into place: %v, want web-n", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "db.yaml"), []byte(pod("db", "busybox:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := names(awaitUpdate(t, updates, "a file written and closed")); len(got) != 2 {
		t.Fatalf("after a file was written: %v, want db-n and web-n", got)
	}
}

// A quick scan never sends a state that did not last: a save that moves the old file
// away before writing the new one (vim's backup) sends the edit, never the pod's
// removal; a file caught half written is not sent until it is whole.
func TestWatcherQuickScanSendsNoPassingState(t *testing.T) {
	dir := t.TempDir()
	updates, p := runQuickWatcher(t, dir)
	web := filepath.Join(dir, "web.yaml")
	saveAtomically(t, web, pod("web", "busybox:1"))
	awaitUpdate(t, updates, "the first save")

	if err := os.Rename(web, web+"~"); err != nil {
		t.Fatal(err)
	}
	noUpdate(t, updates, p, "the file moved away")
	if err := os.WriteFile(web, []byte(pod("web", "busybox:2")), 0o644); err != nil {
		t.Fatal(err)
	}
	edited := awaitUpdate(t, updates, "the new file written")
	if len(edited.Pods) != 1 || edited.Pods[0].Spec.Containers[0].Image != "busybox:2" {
		t.Fatalf("after the save: %v, want web-n with busybox:2", names(edited))
	}

	half, err := os.Create(filepath.Join(dir, "half.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	full := "apiVersion: v1\nkind: Pod\nmetadata: {name: half}\nspec:\n  containers:\n  - name: c\n    image: busybox:1\n    command: [sleep, \"1\"]\n"
	cut := strings.Index(full, "    command")
	if _, err := half.WriteString(full[:cut]); err != nil { // valid so far: a pod without its command
		t.Fatal(err)
	}
	saveAtomically(t, filepath.Join(dir, "other.yaml"), pod("other", "busybox:1"))
	noUpdate(t, updates, p, "a whole file while another is half written")
	if _, err := half.WriteString(full[cut:]); err != nil {
		t.Fatal(err)
	}
	if err := half.Close(); err != nil {
		t.Fatal(err)
	}
	u := awaitUpdate(t, updates, "the half-written file closed")
	for _, p := range u.Pods {
		if p.Name == "half-n" && len(p.Spec.Containers[0].Command) == 0 {
			t.Fatalf("the half-written pod was sent without its command")
		}
	}
	if got := names(u); len(got) != 3 {
		t.Fatalf("after the file was closed: %v, want half-n, other-n and web-n", got)
	}
}

// A file deleted (rm) stops its pods at once, before its burst settles; a file renamed
// out of the directory waits for the burst to settle, as an editor's save may bring it
// back.
func TestWatcherSendsDeletionsAtOnce(t *testing.T) {
	dir := t.TempDir()
	updates, p := runQuickWatcher(t, dir)
	for _, name := range []string{"web", "db", "cache"} {
		saveAtomically(t, filepath.Join(dir, name+".yaml"), pod(name, "busybox:1"))
		awaitUpdate(t, updates, "the save of "+name)
	}
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	if got := names(awaitUpdate(t, updates, "a deletion")); len(got) != 2 || slices.Contains(got, "web-n") {
		t.Fatalf("after web.yaml was deleted: %v, want cache-n and db-n", got)
	}
	if err := os.Rename(filepath.Join(dir, "cache.yaml"), filepath.Join(t.TempDir(), "cache.yaml")); err != nil {
		t.Fatal(err)
	}
	noUpdate(t, updates, p, "a file renamed away")
}

// The files completed while the watcher sends a snapshot are taken by one quick scan,
// not a scan each: a burst of n files written faster than they are scanned would
// otherwise read the directory n times.
func TestWatcherTakesTheFilesCompletedMeanwhileInOneScan(t *testing.T) {
	dir := t.TempDir()
	w := &Watcher{Path: dir, Node: "n", Period: time.Hour, Settle: time.Hour}
	var scans atomic.Int32
	w.afterScan = func() { scans.Add(1) }
	entered := make(chan struct{}, 100)
	updates := make(chan manifests.Update) // unbuffered: the watcher waits in emit until the test takes its snapshot
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- w.Run(ctx, func(ctx context.Context, u manifests.Update) error {
			entered <- struct{}{}
			select {
			case updates <- u:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	defer func() { cancel(); <-done }()
	awaitUpdate(t, updates, "start")
	if err := os.WriteFile(filepath.Join(dir, "first.yaml"), []byte(pod("first", "busybox:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered: // the start's
	case <-time.After(10 * time.Second):
	}
	select {
	case <-entered: // the watcher sends first.yaml's snapshot, and waits for the test to take it
	case <-time.After(10 * time.Second):
		t.Fatal("no snapshot sent for first.yaml")
	}
	for i := range 10 {
		name := fmt.Sprintf("p%02d", i)
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(pod(name, "busybox:1")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the kernel's events reach the watcher's queue
	before := scans.Load()
	if got := names(awaitUpdate(t, updates, "first.yaml")); len(got) != 1 {
		t.Fatalf("first snapshot %v, want first-n alone", got)
	}
	if got := names(awaitUpdate(t, updates, "the ten files written meanwhile")); len(got) != 11 {
		t.Fatalf("next snapshot %v, want all 11 pods", got)
	}
	// The scan that sent first.yaml's snapshot ends once the test took it; then one scan
	// takes the ten. That scan is counted after its snapshot was taken, so wait for it,
	// then give a scan too many the time to show.
	deadline := time.Now().Add(10 * time.Second)
	for scans.Load()-before < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := scans.Load() - before; n != 2 {
		t.Errorf("%d scans from the first snapshot to the one with the ten files, want 2", n)
	}
}
