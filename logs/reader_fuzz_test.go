package logs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
)

// A follower of a log truncated in place (logrotate's copytruncate) starts over at the
// file's beginning, rather than waiting for ever past its end.
func TestReadFollowsTruncation(t *testing.T) {
	path := writeLog(t, rec(0, Stdout, "F", "before the truncation, a long line"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() { done <- Read(ctx, path, ReadOptions{Tail: -1, Follow: true}, out) }()
	awaitOutput(t, out, "before the truncation, a long line\n")
	if err := os.WriteFile(path, []byte(rec(1, Stdout, "F", "after")), 0o600); err != nil { // O_TRUNC: the same file, shorter
		t.Fatal(err)
	}
	awaitOutput(t, out, "before the truncation, a long line\nafter\n")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Read after cancel = %v, want nil", err)
	}
}

// FuzzRead reads a log file of any content, with any options, as /containerLogs does
// for `staticpod logs`: nothing may panic or fail, --tail's output must be the end of
// the whole output, and a follower that polls while the file grows in two steps, is
// rotated (rotated holds what the older file had) and then truncated must neither fail
// nor print what is not in the files.
func FuzzRead(f *testing.F) {
	good := rec(0, Stdout, "P", "hel") + rec(1, Stderr, "F", "err") + rec(2, Stdout, "F", "lo")
	f.Add([]byte(good), []byte(rec(3, Stdout, "F", "older")), 2, uint8(0), false, uint16(30))
	f.Add([]byte("not a record\n\x00\xff garbage"+good[:50]), []byte{}, -1, uint8(1), true, uint16(0))
	f.Add([]byte(strings.Repeat(rec(0, Stdout, "P", strings.Repeat("x", 100)), 3)), []byte("2025-03-01T12:00:00Z stdout P"), 1, uint8(2), true, uint16(500))
	f.Add([]byte("2025-03-01T12:00:00Z stdout F:x:y \n2025-03-01T12:00:00+99:99 stderr F z\n"), []byte("\n\n\n"), 0, uint8(0), false, uint16(7))
	f.Fuzz(func(t *testing.T, data, rotated []byte, tail int, stream uint8, timestamps bool, split uint16) {
		dir := t.TempDir()
		path := filepath.Join(dir, "0.log")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		opts := ReadOptions{Tail: tail % 1000, Timestamps: timestamps, Stream: []Stream{"", Stdout, Stderr}[stream%3]}
		all := opts
		all.Tail = -1
		whole := readAll(t, path, all)
		tailed := readAll(t, path, opts)
		if !bytes.HasSuffix(whole, tailed) {
			t.Errorf("--tail %d read %q, not the end of the whole %q", opts.Tail, tailed, whole)
		}
		if opts.Tail == 0 && len(tailed) > 0 {
			t.Errorf("--tail 0 read %q", tailed)
		}

		// Following, polled by hand: the file grows, is rotated and then truncated.
		cut := min(int(split), len(data))
		if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		r, err := open(path, all, &out)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { r.f.Close() }()
		step := func(what string) {
			if err := r.poll(); err != nil {
				t.Fatalf("poll after %s: %v", what, err)
			}
		}
		step("the first part")
		appendFile(t, path, data[cut:])
		step("the rest")
		if err := os.Rename(path, path+".20250301-120000"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, rotated, 0o600); err != nil {
			t.Fatal(err)
		}
		step("a rotation")
		if err := os.Truncate(path, int64(len(rotated)/2)); err != nil {
			t.Fatal(err)
		}
		step("a truncation")
		if err := r.flushPending(); err != nil {
			t.Fatal(err)
		}
		// What it printed comes from the files: with no timestamps, each line's bytes are
		// in the data read.
		if !opts.Timestamps {
			for _, l := range bytes.Split(out.Bytes(), []byte{'\n'}) {
				if !bytes.Contains(data, l) && !bytes.Contains(rotated, l) && !joinedFrom(l, data, rotated) {
					t.Errorf("the follower printed %q, found in neither file", l)
				}
			}
		}
	})
}

// joinedFrom reports whether l could be P records' contents joined: every byte of l
// appears in the files (a weak check, for lines longer than any one record).
func joinedFrom(l []byte, files ...[]byte) bool {
	for _, b := range l {
		found := false
		for _, f := range files {
			if bytes.IndexByte(f, b) >= 0 {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func readAll(t *testing.T, path string, opts ReadOptions) []byte {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := Read(ctx, path, opts, &out); err != nil {
		t.Fatalf("Read(%+v): %v", opts, err)
	}
	return out.Bytes()
}

func appendFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
}
