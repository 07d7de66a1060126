package watcher

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
)

// writeByRename writes content to path as editors and deployment tools do: a temp file
// renamed over it.
func writeByRename(t *testing.T, path, content string) {
	t.Helper()
	renameIn(t, path, func(tmp string) error { return os.WriteFile(tmp, []byte(content), 0o644) })
}

// 1,000 manifest files arriving at once converge quickly on one snapshot with every
// pod, without the source sending a snapshot per file.
func TestChaosThousandFilesAtOnce(t *testing.T) {
	dir := t.TempDir()
	updates := runWatcher(t, dir, time.Hour)
	awaitUpdate(t, updates, "start")
	const files = 1000
	start := time.Now()
	for i := range files {
		writeByRename(t, filepath.Join(dir, fmt.Sprintf("p%04d.yaml", i)), pod(fmt.Sprintf("p%04d", i), "busybox:1"))
	}
	written := time.Since(start)
	sent := 0
	u := awaitMatch(t, updates, "1,000 files", func(u manifests.Update) bool { sent++; return len(u.Pods) == files })
	converged := time.Since(start)
	t.Logf("1,000 files written in %s; a snapshot with all their pods %s after the first write, the %dth snapshot sent", written, converged, sent)
	if len(u.Failures) != 0 {
		t.Errorf("failures: %v", u.Failures)
	}
	if converged > written+10*time.Second {
		t.Errorf("the source took %s to converge on 1,000 files written in %s", converged, written)
	}
	if sent > files/10 {
		t.Errorf("%d snapshots sent for 1,000 files: the source should send far fewer", sent)
	}
}

// A manifest rewritten 100 times a second for 10 s converges on its last content: the
// last snapshot sent has it, and the source sends fewer snapshots than writes.
func TestChaosRewrittenHundredTimesASecond(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s of rewrites")
	}
	dir := t.TempDir()
	updates := runWatcher(t, dir, time.Hour)
	awaitUpdate(t, updates, "start")
	var mu sync.Mutex // guards last and sent
	var last manifests.Update
	sent := 0
	done := make(chan struct{})
	defer close(done)
	go func() { // take the snapshots as they come, as the runner does
		for {
			select {
			case u := <-updates:
				mu.Lock()
				last, sent = u, sent+1
				mu.Unlock()
			case <-done:
				return
			}
		}
	}()
	path := filepath.Join(dir, "web.yaml")
	tick := time.NewTicker(10 * time.Millisecond)
	writes := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); writes++ {
		<-tick.C
		writeByRename(t, path, pod("web", fmt.Sprintf("busybox:%d", writes)))
	}
	tick.Stop()
	want := fmt.Sprintf("busybox:%d", writes-1)
	testenv.Await(t, "a snapshot with the last content", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(last.Pods) == 1 && last.Pods[0].Spec.Containers[0].Image == want
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d writes in 10 s, %d snapshots sent", writes, sent)
	if sent > writes {
		t.Errorf("%d snapshots for %d writes", sent, writes)
	}
}
