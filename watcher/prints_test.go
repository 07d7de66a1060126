package watcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/staticpod/staticpod/manifests"
)

// writeMany writes n manifest files of one pod each into dir, calling after with
// each path once it is written whole.
func writeMany(tb testing.TB, dir string, n int, after func(path string)) {
	tb.Helper()
	for i := range n {
		name := fmt.Sprintf("p%03d", i)
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(pod(name, "busybox:1")), 0o644); err != nil {
			tb.Fatal(err)
		}
		after(path)
	}
}

func discard(context.Context, manifests.Update) error { return nil }

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
