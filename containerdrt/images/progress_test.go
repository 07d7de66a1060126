package images

import (
	"math/rand/v2"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

func TestEnsureReportsGrowingProgressOfASlowPull(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	reg := testenv.StartRegistry(t, "", "")
	// containerd copies a blob into its content store a MiB at a time: a layer of some
	// MiB that arrives at 1 MiB/s shows its offset grow over a few measures.
	opts := imageOptionsFor(t, "")
	opts.Files["noise"] = testenv.File{Content: noise(3 << 20)}
	ref := reg.Push(t, "app/slow:1", opts)
	reg.ThrottleBlobs(1 << 20)
	imgs := newStore(d.Client, Config{}, pullLogger(t))

	var mu sync.Mutex // guards seen
	var seen []wire.PullProgress
	img, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullIfNotPresent, Progress: func(p wire.PullProgress) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatalf("Ensure(%s) = %v", ref, err)
	}
	stored, err := d.Client.GetImage(ctx, img.Ref)
	if err != nil {
		t.Fatal(err)
	}
	want := img.Size - stored.Target().Size // the layers and config: not the manifest
	mu.Lock()
	defer mu.Unlock()
	t.Logf("progress of a pull of %d bytes: %v", img.Size, seen)
	if len(seen) == 0 || seen[0] != (wire.PullProgress{}) {
		t.Fatalf("progress = %v, want a report of nothing yet at the start", seen)
	}
	var growing []int64
	for i, p := range seen {
		if i > 0 && p.Done < seen[i-1].Done {
			t.Errorf("progress went back: %v then %v", seen[i-1], p)
		}
		if p.Total != 0 && p.Total != want {
			t.Errorf("total = %d, want the layers' and config's: %d", p.Total, want)
		}
		if p.Total != 0 && p.Done > 0 && p.Done < p.Total && (len(growing) == 0 || growing[len(growing)-1] != p.Done) {
			growing = append(growing, p.Done)
		}
	}
	if len(growing) < 2 {
		t.Errorf("progress %v shows fewer than two partial offsets, want the bytes growing", seen)
	}
}

func TestEnsureReportsNoProgressWithoutAPull(t *testing.T) {
	d := ctd.Daemon(t)
	ctx := d.Context(t, d.Namespace(t))
	reg := testenv.StartRegistry(t, "", "")
	ref := reg.Push(t, "app/present:1", imageOptionsFor(t, ""))
	imgs := newStore(d.Client, Config{}, pullLogger(t))
	if _, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullIfNotPresent}); err != nil {
		t.Fatalf("Ensure(%s) = %v", ref, err)
	}
	calls := 0
	if _, err := imgs.Ensure(ctx, runner.PullRequest{Image: ref, Policy: corev1.PullIfNotPresent, Progress: func(wire.PullProgress) { calls++ }}); err != nil {
		t.Fatalf("second Ensure(%s) = %v", ref, err)
	}
	if calls != 0 {
		t.Errorf("an image present reported progress %d times, want none", calls)
	}
}

// noise is n bytes that do not compress.
func noise(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{})
	r.Read(b)
	return b
}
