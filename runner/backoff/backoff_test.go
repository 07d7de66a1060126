package backoff

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := New()
	exit := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	started := exit.Add(-time.Second)
	if w := b.Wait("u", "c", started, exit, exit); w != 0 {
		t.Fatalf("first restart waits %v, want 0 (at once)", w)
	}
	var waits []time.Duration
	for range 7 {
		b.Restarted("u", "c")
		waits = append(waits, b.Wait("u", "c", started, exit, exit))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("wait after restart %d = %v, want %v", i+1, waits[i], want[i])
		}
	}
	if w := b.Wait("u", "c", started, exit, exit.Add(4*time.Minute)); w != time.Minute {
		t.Errorf("wait 4 min after the exit = %v, want the remaining 1m", w)
	}
	if w := b.Wait("u", "other", started, exit, exit); w != 0 {
		t.Errorf("another container waits %v, want 0", w)
	}
	if w := b.Wait("u", "c", exit.Add(-Reset), exit, exit); w != 0 {
		t.Errorf("a container that ran 10 min waits %v, want 0 (back-off reset)", w)
	}
	b.Restarted("u", "c")
	if w := b.Wait("u", "c", started, exit, exit); w != Initial {
		t.Errorf("after a reset the wait is %v, want %v", w, Initial)
	}
	b.Forget("u")
	if w := b.Wait("u", "c", started, exit, exit); w != 0 {
		t.Errorf("after Forget the wait is %v, want 0", w)
	}
}
