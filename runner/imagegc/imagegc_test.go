package imagegc

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/api/wire"
)

const mib = 1 << 20

func TestBytesToFree(t *testing.T) {
	policy := Policy{HighThresholdPercent: 85, LowThresholdPercent: 80}
	for _, tc := range []struct {
		name   string
		policy Policy
		fs     FSUsage
		want   int64
	}{
		{"below high", policy, FSUsage{Capacity: 100 * mib, Available: 16 * mib}, 0},
		{"at high", policy, FSUsage{Capacity: 100 * mib, Available: 15 * mib}, 5 * mib},
		{"full", policy, FSUsage{Capacity: 100 * mib, Available: 0}, 20 * mib},
		{"high 100 is off", Policy{HighThresholdPercent: 100, LowThresholdPercent: 80}, FSUsage{Capacity: 100 * mib}, 0},
		{"no capacity", policy, FSUsage{}, 0},
		{"high 0 always collects", Policy{}, FSUsage{Capacity: 100 * mib, Available: 90 * mib}, 10 * mib},
	} {
		if got := tc.policy.BytesToFree(tc.fs); got != tc.want {
			t.Errorf("BytesToFree(%s) = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestValidatePolicy(t *testing.T) {
	for _, p := range []Policy{
		{HighThresholdPercent: 101, LowThresholdPercent: 80},
		{HighThresholdPercent: 85, LowThresholdPercent: -1},
		{HighThresholdPercent: 80, LowThresholdPercent: 85},
		{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: -time.Second},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", p)
		}
	}
	if err := (Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}).Validate(); err != nil {
		t.Errorf("Validate(defaults) = %v", err)
	}
}

func TestSelect(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	img := func(id string, size int64, created, lastUsed time.Time) wire.ImageUse {
		return wire.ImageUse{StoredImage: wire.StoredImage{ID: id, Size: size, Created: created}, LastUsed: lastUsed}
	}
	old, older, oldest := img("old", 10, ago(time.Hour), time.Time{}), img("older", 10, ago(2*time.Hour), time.Time{}), img("oldest", 10, ago(3*time.Hour), time.Time{})
	usedRecently := img("used-recently", 10, ago(4*time.Hour), ago(time.Minute))
	usedLongAgo := img("used-long-ago", 10, ago(4*time.Hour), ago(time.Hour))
	young := img("young", 10, ago(time.Minute), time.Time{})
	inUse := img("in-use", 10, ago(5*time.Hour), now)
	inUse.InUse = true
	pinned := img("pinned", 10, ago(5*time.Hour), time.Time{})
	pinned.Pinned = true
	all := []wire.ImageUse{usedRecently, old, inUse, young, oldest, pinned, usedLongAgo, older}
	for _, tc := range []struct {
		name   string
		toFree int64
		minAge time.Duration
		want   []string
	}{
		{"nothing to free", 0, 2 * time.Minute, nil},
		{"one image's worth", 10, 2 * time.Minute, []string{"oldest"}},
		{"part of an image", 11, 2 * time.Minute, []string{"oldest", "older"}},
		{"never used before used long ago before used recently", 45, 2 * time.Minute, []string{"oldest", "older", "old", "used-long-ago", "used-recently"}},
		{"more than there is: never in use, pinned or young", 1000, 2 * time.Minute, []string{"oldest", "older", "old", "used-long-ago", "used-recently"}},
		{"no minimum age", 1000, 0, []string{"oldest", "older", "old", "young", "used-long-ago", "used-recently"}},
	} {
		var got []string
		for _, u := range Select(slices.Clone(all), tc.toFree, tc.minAge, now) {
			got = append(got, u.ID)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Select(%s) = %v, want %v (-want +got):\n%s", tc.name, got, tc.want, diff)
		}
	}
}
