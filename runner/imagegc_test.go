package runner

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

const mib = 1 << 20

// fakeImages is an ImageStore whose filesystem holds its images' sizes plus other, of
// capacity bytes.
type fakeImages struct {
	mu       sync.Mutex // guards images and removed
	capacity int64
	other    int64
	images   []StoredImage
	removed  []string
	listed   func() // called after each ListImages; may be nil
}

func (f *fakeImages) ImageFS(context.Context) (FSUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	used := f.other
	for _, img := range f.images {
		used += img.Size
	}
	return FSUsage{Path: "/images", Capacity: f.capacity, Available: f.capacity - used}, nil
}

func (f *fakeImages) ListImages(context.Context) ([]StoredImage, error) {
	f.mu.Lock()
	out := slices.Clone(f.images)
	listed := f.listed
	f.mu.Unlock()
	if listed != nil {
		listed()
	}
	return out, nil
}

func (f *fakeImages) RemoveImage(_ context.Context, img StoredImage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images = slices.DeleteFunc(f.images, func(i StoredImage) bool { return i.ID == img.ID })
	f.removed = append(f.removed, img.ID)
	return nil
}

func (f *fakeImages) ImageName(image string) string { return "example.com/" + image }

// TestCollectFreesDownToLowThreshold fills a fake image filesystem past the high
// threshold and checks that collection removes the least recently used unused images
// until it is at the low threshold, never one a pod uses, a pod wants or the image dir
// pins, and says so in events and metrics (a failure to free enough counted as one).
func TestCollectFreesDownToLowThreshold(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f := newFakeRuntime(func() time.Time { return now })
	created := now.Add(-time.Hour)
	store := &fakeImages{capacity: 100 * mib, other: 10 * mib, images: []StoredImage{
		{ID: "sha256:running", Names: []string{"example.com/running:1"}, Digests: []string{"sha256:running-manifest"}, Size: 20 * mib, Created: created.Add(-time.Hour)},
		{ID: "sha256:wanted", Names: []string{"example.com/wanted:1"}, Size: 20 * mib, Created: created.Add(-time.Hour)},
		{ID: "sha256:pinned", Names: []string{"example.com/pinned:1"}, Size: 10 * mib, Created: created.Add(-time.Hour), Pinned: true},
		{ID: "sha256:a", Names: []string{"example.com/a:1"}, Size: 10 * mib, Created: created},
		{ID: "sha256:b", Names: []string{"example.com/b:1"}, Size: 10 * mib, Created: created.Add(time.Minute)},
		{ID: "sha256:c", Names: []string{"example.com/c:1"}, Size: 10 * mib, Created: created.Add(2 * time.Minute)},
	}}
	// 90% full: 10 MiB must go to be at 80%.
	r, err := New(Options{Runtime: f, Now: func() time.Time { return now }, Images: store,
		ImageGC: ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	f.put(Container{ID: "run", Kind: KindContainer, PodUID: "u1", Name: "c", State: StateRunning,
		Image: "example.com/other-name:1", ImageRef: "sha256:running-manifest"})
	if _, err := r.pleg.Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.pub.wantedImages = []string{"wanted:1"}
	if err := r.imageGC.Collect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sha256:a"}, store.removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	// A pod uses b from now on, and the filesystem fills again: c and then the pinned
	// one are all that may go, and c is not enough.
	f.put(Container{ID: "b", Kind: KindContainer, PodUID: "u2", Name: "c", State: StateExited, Image: "example.com/b:1"})
	if _, err := r.pleg.Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.other += 20 * mib
	store.mu.Unlock()
	if err := r.imageGC.Collect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sha256:a", "sha256:c"}, store.removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	var reasons []string
	for _, e := range r.events.All() {
		reasons = append(reasons, e.Reason)
	}
	if diff := cmp.Diff([]string{ReasonImageRemoved, ReasonImageRemoved, ReasonFreeDiskSpaceFailed}, reasons); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	images, err := r.Images(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	inUse := map[string]bool{}
	for _, img := range images {
		inUse[img.ID] = img.InUse
		if img.InUse && !img.LastUsed.Equal(now) {
			t.Errorf("image %s in use, last used %v, want %v", img.ID, img.LastUsed, now)
		}
	}
	if diff := cmp.Diff(map[string]bool{"sha256:running": true, "sha256:wanted": true, "sha256:pinned": false, "sha256:b": true}, inUse); diff != "" {
		t.Errorf("Images in use (-want +got):\n%s", diff)
	}
	if got, want := counterOf(t, r.metrics.imagesRemoved), 2.0; got != want {
		t.Errorf("staticpod_image_gc_removed_images_total = %v, want %v", got, want)
	}
	if got, want := counterOf(t, r.metrics.imageBytesFreed), float64(20*mib); got != want {
		t.Errorf("staticpod_image_gc_freed_bytes_total = %v, want %v", got, want)
	}
	for reason, want := range map[string]float64{ReasonFreeDiskSpaceFailed: 1, ReasonImageGCFailed: 0} {
		if got := counterOf(t, r.metrics.imageGCFailures.WithLabelValues(reason)); got != want {
			t.Errorf("staticpod_image_gc_failures_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

// TestImageCollectorWaitsForSources checks that nothing is collected before every
// source has delivered its pods: until then, what is in use is not known.
func TestImageCollectorWaitsForSources(t *testing.T) {
	f := newFakeRuntime(time.Now)
	store := &fakeImages{capacity: 100 * mib, other: 99 * mib, images: []StoredImage{{ID: "sha256:a", Size: mib}}}
	r, err := New(Options{Runtime: f, Images: store, Sources: []string{"file"}, RelistPeriod: time.Millisecond,
		ImageGC: ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80}})
	if err != nil {
		t.Fatal(err)
	}
	if r.imageGC.Ready() {
		t.Fatal("collector ready before any relist")
	}
	r.pub.relists.Add(1)
	if r.imageGC.Ready() {
		t.Fatal("collector ready before the file source delivered")
	}
	r.pub.setReady("file")
	if !r.imageGC.Ready() {
		t.Fatal("collector not ready once the file source delivered")
	}
}

func counterOf(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestCollectSparesAnImageWantedSinceTheList checks that an image a pod comes to want
// after the images were listed is not removed: in-use is asked again before each
// removal.
func TestCollectSparesAnImageWantedSinceTheList(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f := newFakeRuntime(func() time.Time { return now })
	store := &fakeImages{capacity: 100 * mib, other: 70 * mib, images: []StoredImage{
		{ID: "sha256:a", Names: []string{"example.com/a:1"}, Size: 10 * mib, Created: now.Add(-2 * time.Hour)},
		{ID: "sha256:b", Names: []string{"example.com/b:1"}, Size: 10 * mib, Created: now.Add(-time.Hour)},
	}}
	r, err := New(Options{Runtime: f, Now: func() time.Time { return now }, Images: store,
		ImageGC: ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80}})
	if err != nil {
		t.Fatal(err)
	}
	store.listed = func() {
		r.pub.mu.Lock()
		r.pub.wantedImages = []string{"a:1"}
		r.pub.mu.Unlock()
	}
	if err := r.imageGC.Collect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sha256:b"}, store.removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
}
