package runner

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := NewBackoffs()
	exit := t0
	last := Container{StartedAt: exit.Add(-time.Second), FinishedAt: exit}
	if w := b.Wait("u", "c", last, exit); w != 0 {
		t.Fatalf("first restart waits %v, want 0 (at once)", w)
	}
	var waits []time.Duration
	for range 7 {
		b.Restarted("u", "c")
		waits = append(waits, b.Wait("u", "c", last, exit))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("wait after restart %d = %v, want %v", i+1, waits[i], want[i])
		}
	}
	if w := b.Wait("u", "c", last, exit.Add(4*time.Minute)); w != time.Minute {
		t.Errorf("wait 4 min after the exit = %v, want the remaining 1m", w)
	}
	if w := b.Wait("u", "other", last, exit); w != 0 {
		t.Errorf("another container waits %v, want 0", w)
	}
	longRun := Container{StartedAt: exit.Add(-backoffReset), FinishedAt: exit}
	if w := b.Wait("u", "c", longRun, exit); w != 0 {
		t.Errorf("a container that ran 10 min waits %v, want 0 (back-off reset)", w)
	}
	b.Restarted("u", "c")
	if w := b.Wait("u", "c", last, exit); w != backoffInitial {
		t.Errorf("after a reset the wait is %v, want %v", w, backoffInitial)
	}
	b.Forget("u")
	if w := b.Wait("u", "c", last, exit); w != 0 {
		t.Errorf("after Forget the wait is %v, want 0", w)
	}
}
