package testenv

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAwaitReturnsOnceTheConditionHolds(t *testing.T) {
	polls := 0
	Await(t, "the third poll", time.Second, func() bool {
		polls++
		return polls == 3
	})
	if polls != 3 {
		t.Errorf("Await returned after %d polls, want 3", polls)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records its message and ends the caller
// by a panic, as FailNow ends the test's goroutine.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

func TestAwaitFailsNamingWhatItAwaited(t *testing.T) {
	r := &fatalRecorder{}
	start := time.Now()
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("Await did not fail: recovered %v", p)
			}
		}()
		Await(r, "pod web running", 100*time.Millisecond, func() bool { return false })
	}()
	if took := time.Since(start); took < 100*time.Millisecond || took > 5*time.Second {
		t.Errorf("Await gave up after %v, want its 100ms timeout", took)
	}
	if want := "timed out after 100ms waiting for pod web running"; r.msg != want {
		t.Errorf("failure = %q, want %q", r.msg, want)
	}
}

func TestBufferTakesConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x"))
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Errorf("String() = %d bytes, want 400", len(got))
	}
}
