package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/runner"
)

func TestPrintImages(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	images := []runner.ImageUse{
		{StoredImage: runner.StoredImage{ID: "sha256:0123456789abcdef", Names: []string{"docker.io/library/busybox:1", "example.com/busybox:1"}, Size: 4718592, Created: now.Add(-time.Hour)}, InUse: true, LastUsed: now},
		{StoredImage: runner.StoredImage{ID: "sha256:fedcba9876543210", Names: []string{"example.com/old:1"}, Size: 512, Created: now.Add(-48 * time.Hour)}, LastUsed: now.Add(-10 * time.Minute)},
		{StoredImage: runner.StoredImage{ID: "sha256:aaaaaaaaaaaaaaaa", Names: []string{"example.com/shipped:1"}, Size: 3 << 30, Created: now.Add(-time.Minute), Pinned: true}},
	}
	var b strings.Builder
	if err := printImages(&b, images, now); err != nil {
		t.Fatal(err)
	}
	want := `IMAGE                                               ID             SIZE     AGE   LAST USED   IN USE   PINNED
docker.io/library/busybox:1,example.com/busybox:1   0123456789ab   4.5MiB   60m   now         yes      no
example.com/old:1                                   fedcba987654   512B     2d    10m ago     no       no
example.com/shipped:1                               aaaaaaaaaaaa   3.0GiB   60s   <unknown>   no       yes
`
	if b.String() != want {
		t.Errorf("printImages =\n%s\nwant\n%s", b.String(), want)
	}
}
