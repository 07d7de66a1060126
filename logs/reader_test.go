package logs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
)

// rec returns a CRI record written sec seconds after epoch.
func rec(sec int, stream Stream, tag, content string) string {
	return fmt.Sprintf("%s %s %s %s\n", epoch.Add(time.Duration(sec)*time.Second).Format(time.RFC3339Nano), stream, tag, content)
}

func writeLog(t *testing.T, records ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(strings.Join(records, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustRead(t *testing.T, path string, opts ReadOptions) string {
	t.Helper()
	var out bytes.Buffer
	if err := Read(t.Context(), path, opts, &out); err != nil {
		t.Fatalf("Read(%s, %+v): %v", path, opts, err)
	}
	return out.String()
}

func TestReadJoinsPartialRecords(t *testing.T) {
	path := writeLog(t,
		rec(0, Stdout, "P", "hel"),
		rec(1, Stderr, "F", "an error"),
		rec(2, Stdout, "P", "lo "),
		rec(3, Stdout, "F", "world"),
		rec(4, Stdout, "F:x", ""), // tags may carry more after ':'
	)
	if got, want := mustRead(t, path, ReadOptions{Tail: -1}), "an error\nhello world\n\n"; got != want {
		t.Errorf("Read = %q, want %q", got, want)
	}
	want := "2025-03-01T12:00:01.120000000Z an error\n" +
		"2025-03-01T12:00:00.120000000Z hello world\n" + // a joined line has its first record's time
		"2025-03-01T12:00:04.120000000Z \n"
	if got := mustRead(t, path, ReadOptions{Tail: -1, Timestamps: true}); got != want {
		t.Errorf("Read with timestamps = %q, want %q", got, want)
	}
}

func TestReadTailAndStream(t *testing.T) {
	path := writeLog(t,
		rec(0, Stdout, "F", "out 1"),
		rec(1, Stderr, "F", "err 1"),
		rec(2, Stdout, "P", "out "),
		rec(3, Stdout, "F", "2"),
		rec(4, Stderr, "F", "err 2"),
	)
	tests := []struct {
		opts ReadOptions
		want string
	}{
		{ReadOptions{Tail: -1}, "out 1\nerr 1\nout 2\nerr 2\n"},
		{ReadOptions{Tail: 2}, "out 2\nerr 2\n"}, // lines, not records
		{ReadOptions{Tail: 10}, "out 1\nerr 1\nout 2\nerr 2\n"},
		{ReadOptions{Tail: 0}, ""},
		{ReadOptions{Tail: -1, Stream: Stderr}, "err 1\nerr 2\n"},
		{ReadOptions{Tail: 1, Stream: Stdout}, "out 2\n"},
	}
	for _, tt := range tests {
		if got := mustRead(t, path, tt.opts); got != tt.want {
			t.Errorf("Read(%+v) = %q, want %q", tt.opts, got, tt.want)
		}
	}
}

func TestReadEndsOfFiles(t *testing.T) {
	path := writeLog(t,
		"not a CRI record\n",
		rec(0, "stdin", "F", "no such stream"),
		"yesterday stdout F bad time\n",
		rec(1, Stdout, "F", "kept"),
		rec(2, Stdout, "P", "output without a final newline"),
		strings.TrimSuffix(rec(3, Stderr, "F", "record cut short by a crash"), "\n"),
	)
	want := "kept\nrecord cut short by a crash\noutput without a final newline"
	if got := mustRead(t, path, ReadOptions{Tail: -1}); got != want {
		t.Errorf("Read = %q, want %q", got, want)
	}
}

func TestReadFollowsAppendsAndRotations(t *testing.T) {
	// Records are 41 bytes ("2025-03-01T12:00:00.12Z stdout F line 01\n"), so with a
	// MaxSize of 100 every third record starts a new file.
	w := mustOpen(t, Config{MaxSize: 100, MaxFiles: 2}, steppingClock(time.Second))
	mustCopy(t, w, Stdout, "line 01\nline 02\n")

	ctx, cancel := context.WithCancel(t.Context())
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() { done <- Read(ctx, w.cfg.Path, ReadOptions{Tail: 1, Follow: true}, out) }()
	awaitOutput(t, out, "line 02\n")

	mustCopy(t, w, Stdout, "line 03\nline 04\n")
	awaitOutput(t, out, "line 02\nline 03\nline 04\n")
	if rotated, _ := Rotated(w.cfg.Path); len(rotated) != 1 {
		t.Fatalf("rotated files = %v, want 1: the test must rotate", rotated)
	}
	mustCopy(t, w, Stdout, "line 05\nline 06\n")
	awaitOutput(t, out, "line 02\nline 03\nline 04\nline 05\nline 06\n")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Read after cancel = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return after its context ended")
	}
}

func TestReadFollowJoinsAcrossRotation(t *testing.T) {
	w := mustOpen(t, Config{MaxSize: 60, MaxFiles: 4, MaxLineSize: 10}, steppingClock(time.Second))
	mustCopy(t, w, Stdout, "first\n")
	ctx, cancel := context.WithCancel(t.Context())
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() { done <- Read(ctx, w.cfg.Path, ReadOptions{Tail: -1, Follow: true}, out) }()
	awaitOutput(t, out, "first\n")
	mustCopy(t, w, Stdout, "0123456789abcdefghij\n") // its P and F records land in two new files at once
	awaitOutput(t, out, "first\n0123456789abcdefghij\n")
	if rotated, _ := Rotated(w.cfg.Path); len(rotated) != 2 {
		t.Errorf("rotated files = %v, want 2: the line must straddle two rotations between polls", rotated)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Read after cancel = %v, want nil", err)
	}
}

// awaitOutput waits until out holds exactly want.
func awaitOutput(t *testing.T, out *testenv.Buffer, want string) {
	t.Helper()
	var got string
	defer func() { // runs as a failed Await ends the test: show what was read instead
		if got != want {
			t.Logf("output = %q, want %q", got, want)
		}
	}()
	testenv.Await(t, "the output read", 5*time.Second, func() bool {
		got = out.String()
		return got == want
	})
}
