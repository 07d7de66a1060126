package testenv

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// awaitPoll paces Await: often enough that a test sees a change within a few
// milliseconds, seldom enough that a condition that asks containerd stays cheap.
const awaitPoll = 20 * time.Millisecond

// Await polls cond until it holds, and fails t when it still does not after timeout;
// what names the awaited state in the failure ("pod web-node1 running"). A helper that
// wants the last state it saw in the failure keeps it in a variable cond sets and logs it
// from a deferred call: a failed Await ends the test's goroutine, which runs it.
//
// Await is the one wait of staticpod's tests. A test that checks that something does not
// happen awaits an event that proves time passed in the system (relists of the runner),
// never a fixed sleep: on a slow machine a sleep passes without checking anything.
func Await(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(awaitPoll)
	}
}

// Buffer is a bytes.Buffer that a process's output (stdout and stderr at once, from
// their own goroutines) and a test reading it can share.
type Buffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
