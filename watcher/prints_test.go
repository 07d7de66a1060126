package watcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/staticpod/staticpod/manifests"
)

// writeMany writes n manifest files of one pod each into dir, calling after with
// each path once it is written whole.
func writeMany(tb testing.TB, dir string, n int, after func(path string)) {
	tb.Helper()
	writeManyOf(tb, dir, n, func(name string) string { return pod(name, "busybox:1") }, after)
}

// writeManyOf writes n manifest files into dir, each the content of its name, calling
// after with each path once it is written whole.
func writeManyOf(tb testing.TB, dir string, n int, content func(name string) string, after func(path string)) {
	tb.Helper()
	for i := range n {
		name := fmt.Sprintf("p%03d", i)
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(content(name)), 0o644); err != nil {
			tb.Fatal(err)
		}
		after(path)
	}
}

func discard(context.Context, manifests.Update) error { return nil }

// A burst of 100 manifest files, one pod each, each written as soon as the watcher
// has sent the one before (the most scans a burst can cause: one per file), has each
// pod fingerprinted about once, when its file is decoded, not once per pod per scan:
// the scan at each whole file does not marshal and hash every pod of the directory
// again.
func TestWatcherFingerprintsABurstOncePerPod(t *testing.T) {
	const files = 100
	got := pacedBurst(t, files, func(name string) string { return pod(name, "busybox:1") },
		func(u manifests.Update, written int) bool { return len(u.Pods) == written }, &podPrints)
	if got > 3*files {
		t.Fatalf("%d pods fingerprinted for a burst of %d files of one pod each, want at most %d", got, files, 3*files)
	}
}

// A burst of 100 manifest files of a ConfigMap and a pod each, written as in
// TestWatcherFingerprintsABurstOncePerPod, has each file's objects fingerprinted
// about once, when the file is decoded, not once per file per scan.
func TestWatcherFingerprintsTheObjectsOfABurstOncePerFile(t *testing.T) {
	const files = 100
	content := func(name string) string {
		return strings.Replace(configMap(name), "{name: web}", "{name: "+name+"}", 1) + "---\n" + pod(name, "busybox:1")
	}
	got := pacedBurst(t, files, content,
		func(u manifests.Update, written int) bool {
			return len(u.Pods) == written && u.Objects.Len() == written
		}, &objectPrints)
	if got > 3*files {
		t.Fatalf("the objects of %d files fingerprinted for a burst of %d files, want at most %d", got, files, 3*files)
	}
}

// pacedBurst writes files manifest files, each the content of its name, into a
// directory a watcher watches, each as soon as the watcher has sent an update holding
// all written so far (holds), and returns how much counter grew until the watcher had
// taken the whole burst.
func pacedBurst(t *testing.T, files int, content func(name string) string, holds func(u manifests.Update, written int) bool, counter *atomic.Int64) int64 {
	t.Helper()
	dir := t.TempDir()
	updates, p := startWatcher(t, &Watcher{Path: dir, Node: "n", Period: time.Hour})
	awaitUpdate(t, updates, "start")
	before := counter.Load()
	written := 0
	writeManyOf(t, dir, files, content, func(path string) {
		written++
		awaitMatch(t, updates, path, func(u manifests.Update) bool { return holds(u, written) })
	})
	noUpdate(t, updates, p, "the burst taken") // every scan of the burst is done
	return counter.Load() - before
}

const classPod = "apiVersion: v1\nkind: Pod\nmetadata: {name: app}\nspec:\n  runtimeClassName: light\n  containers: [{name: c, image: busybox}]\n"

func runtimeClass(cpu string) string {
	return "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: light}\nhandler: crun\noverhead: {podFixed: {cpu: " + cpu + "}}\n"
}

// The fingerprints a scan hands on with each file are those of its pods and objects
// as the scan leaves them: a pod that admission gave its RuntimeClass's overhead has
// the fingerprint of the pod with it, from the file's first scan and from a later one
// that reuses the file as decoded while the RuntimeClass changed; a pod or a ConfigMap
// another file defines first is dropped with its fingerprint.
func TestScanHandsOnTheFingerprintsOfThePodsAndObjectsAsTheyAre(t *testing.T) {
	twice := classPod + "---\n" + configMap("fast") + "---\n" + strings.Replace(configMap("slow"), "{name: web}", "{name: other}", 1)
	dir := writeFiles(t, map[string]string{"app.yaml": twice, "b-again.yaml": twice, "class.yaml": runtimeClass("250m"), "web.yaml": pod("web", "busybox:1")})
	cache := newLoads("n")
	for _, cpu := range []string{"250m", "500m"} {
		if err := os.WriteFile(filepath.Join(dir, "class.yaml"), []byte(runtimeClass(cpu)), 0o644); err != nil {
			t.Fatal(err)
		}
		snap, err := scan([]string{dir}, "n", cache)
		if err != nil {
			t.Fatal(err)
		}
		pods := 0
		for _, f := range snap.Files {
			if got, want := objectsOf(f).fingerprint, f.Result.Objects().Fingerprint(); got != want {
				t.Errorf("RuntimeClass overhead %s: the objects of %s handed on with fingerprint %.12s, want that of the objects as they are, %.12s", cpu, f.Path, got, want)
			}
			for _, pod := range f.Result.Pods {
				pods++
				if got, want := f.print(pod), manifests.Fingerprint(pod); got != want {
					t.Errorf("RuntimeClass overhead %s: pod %s of %s handed on with fingerprint %.12s, want that of the pod as it is, %.12s", cpu, pod.Name, f.Path, got, want)
				}
				if pod.Name == "app-n" && pod.Spec.Overhead.Cpu().String() != cpu {
					t.Errorf("pod app-n has overhead %v, want cpu %s from its RuntimeClass", pod.Spec.Overhead, cpu)
				}
			}
		}
		if pods != 2 || len(snap.Conflicts) != 3 {
			t.Errorf("RuntimeClass overhead %s: %d pods, conflicts %v; want app-n and web-n, b-again.yaml's app-n and ConfigMaps dropped", cpu, pods, snap.Conflicts)
		}
	}
}

// A burst of 100 manifest files, each scanned for as it is written whole (as Run does
// at each completion): the work of the whole burst.
func BenchmarkScanOf100Files(b *testing.B) {
	const files = 100
	root := b.TempDir()
	ctx := context.Background()
	before := podPrints.Load()
	for i := 0; i < b.N; i++ {
		dir := filepath.Join(root, fmt.Sprint(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		w := &Watcher{Path: dir, Node: "n"}
		w.start()
		writeMany(b, dir, files, func(path string) {
			if taken, err := w.scan(ctx, discard, map[string]bool{path: true}); !taken || err != nil {
				b.Fatalf("the quick scan of %s was not taken (err %v)", path, err)
			}
		})
	}
	b.ReportMetric(float64(podPrints.Load()-before)/float64(b.N), "fingerprints/op")
}

// One quick scan with 100 files present and taken: what each file written whole costs
// once many are there.
func BenchmarkQuickScanOf100Files(b *testing.B) {
	const files = 100
	dir := b.TempDir()
	ctx := context.Background()
	w := &Watcher{Path: dir, Node: "n"}
	w.start()
	var last string
	writeMany(b, dir, files, func(path string) { last = path })
	if _, err := w.scan(ctx, discard, nil); err != nil {
		b.Fatal(err)
	}
	whole := map[string]bool{last: true}
	before := podPrints.Load()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if taken, err := w.scan(ctx, discard, whole); !taken || err != nil {
			b.Fatalf("the quick scan was not taken (err %v)", err)
		}
	}
	b.ReportMetric(float64(podPrints.Load()-before)/float64(b.N), "fingerprints/op")
}
