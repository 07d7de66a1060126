package logs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var epoch = time.Date(2025, 3, 1, 12, 0, 0, 120000000, time.UTC)

// steppingClock returns a clock that starts at epoch and advances by step at each call.
func steppingClock(step time.Duration) func() time.Time {
	var calls atomic.Int64
	return func() time.Time { return epoch.Add(time.Duration(calls.Add(1)-1) * step) }
}

// mustOpen opens a writer on a new file in a temporary directory, with clock now (nil for
// the real one).
func mustOpen(t *testing.T, cfg Config, now func() time.Time) *Writer {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "ns_pod_uid", "c", "0.log")
	}
	w, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	if now != nil {
		w.now = now
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// mustCopy copies input as stream and returns the file's records.
func mustCopy(t *testing.T, w *Writer, stream Stream, input string) []string {
	t.Helper()
	if err := w.Copy(stream, strings.NewReader(input)); err != nil {
		t.Fatalf("Copy(%s): %v", stream, err)
	}
	return readRecords(t, w.cfg.Path)
}

func readRecords(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(string(data), "\n")[:strings.Count(string(data), "\n")]
}

func TestCopyWritesCRIRecords(t *testing.T) {
	w := mustOpen(t, Config{}, steppingClock(time.Millisecond))
	got := mustCopy(t, w, Stdout, "hello world\r\n\n  spaced \tline\nno newline at the end")
	want := []string{
		"2025-03-01T12:00:00.12Z stdout F hello world\n",
		"2025-03-01T12:00:00.121Z stdout F \n",
		"2025-03-01T12:00:00.122Z stdout F   spaced \tline\n",
		// containerd CRI writes output that ends without a newline as a partial record.
		"2025-03-01T12:00:00.123Z stdout P no newline at the end\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestCopyTimestampsAreRFC3339Nano(t *testing.T) {
	w := mustOpen(t, Config{}, nil)
	before := time.Now()
	records := mustCopy(t, w, Stderr, "one\ntwo\n")
	for _, rec := range records {
		ts, rest, _ := strings.Cut(rec, " ")
		got, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Errorf("record %q: timestamp: %v", rec, err)
		}
		if got.Before(before.Truncate(time.Microsecond)) || got.After(time.Now()) {
			t.Errorf("record %q: time %v outside the test's run", rec, got)
		}
		if !strings.HasPrefix(rest, "stderr F ") {
			t.Errorf("record %q: want stream stderr and tag F", rec)
		}
	}
}

func TestCopySplitsLongLines(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string // tag and content length of each record
	}{
		{"40KiB", strings.Repeat("x", 40<<10) + "\n", []string{"P 16384", "P 16384", "F 8192"}},
		{"exactly max", strings.Repeat("x", 16<<10) + "\n", []string{"F 16384"}},
		{"max plus one", strings.Repeat("x", 16<<10+1) + "\n", []string{"P 16384", "F 1"}},
		{"CRLF after max", strings.Repeat("x", 16<<10) + "\r\n", []string{"F 16384"}},
		{"no newline", strings.Repeat("x", 20<<10), []string{"P 16384", "P 4096"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustOpen(t, Config{}, nil)
			var got []string
			var joined strings.Builder
			for _, rec := range mustCopy(t, w, Stdout, tt.input) {
				fields := strings.SplitN(strings.TrimSuffix(rec, "\n"), " ", 4)
				got = append(got, fmt.Sprintf("%s %d", fields[2], len(fields[3])))
				joined.WriteString(fields[3])
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if content := strings.TrimRight(tt.input, "\r\n"); joined.String() != content {
				t.Errorf("joined content has %d bytes, want the %d of the input", joined.Len(), len(content))
			}
		})
	}
}

func TestCopyInterleavesStreamsWholeRecords(t *testing.T) {
	const lines = 2000
	w := mustOpen(t, Config{MaxLineSize: 100}, nil)
	var wg sync.WaitGroup
	for _, s := range []Stream{Stdout, Stderr} {
		pr, pw := io.Pipe()
		wg.Go(func() {
			if err := w.Copy(s, pr); err != nil {
				t.Errorf("Copy(%s): %v", s, err)
			}
		})
		wg.Go(func() { // small writes, so that the two streams' records alternate
			for i := range lines {
				fmt.Fprintf(pw, "%s line %d %s\n", s, i, strings.Repeat(string(s[3]), 150))
			}
			pw.Close()
		})
	}
	wg.Wait()
	next := map[Stream]int{}       // the next line number expected per stream
	partial := map[Stream]string{} // content of the line being joined per stream
	for _, rec := range readRecords(t, w.cfg.Path) {
		r, ok := parseRecord([]byte(rec))
		if !ok {
			t.Fatalf("record %q does not parse", rec)
		}
		partial[r.stream] += string(r.content)
		if r.partial {
			continue
		}
		want := fmt.Sprintf("%s line %d %s", r.stream, next[r.stream], strings.Repeat(string(r.stream[3]), 150))
		if partial[r.stream] != want {
			t.Fatalf("%s line = %q, want %q", r.stream, partial[r.stream], want)
		}
		partial[r.stream] = ""
		next[r.stream]++
	}
	if next[Stdout] != lines || next[Stderr] != lines {
		t.Errorf("lines per stream = %v, want %d each", next, lines)
	}
}

func TestRotationKeepsMaxFilesAndNewestContent(t *testing.T) {
	const maxSize, maxFiles, lines = 300, 3, 100
	w := mustOpen(t, Config{MaxSize: maxSize, MaxFiles: maxFiles}, steppingClock(time.Second))
	var input strings.Builder
	for i := range lines {
		fmt.Fprintf(&input, "line %03d\n", i)
	}
	mustCopy(t, w, Stdout, input.String())

	rotated, err := Rotated(w.cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rotated) != maxFiles-1 {
		t.Fatalf("rotated files = %v, want %d", rotated, maxFiles-1)
	}
	var contents []string
	for _, f := range append(rotated, w.cfg.Path) {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > maxSize {
			t.Errorf("%s has %d bytes, more than MaxSize %d", f, info.Size(), maxSize)
		}
		for _, rec := range readRecords(t, f) {
			r, _ := parseRecord([]byte(rec))
			contents = append(contents, string(r.content))
		}
	}
	// What is kept is the newest output, contiguous, oldest file first.
	first := lines - len(contents)
	for i, c := range contents {
		if want := fmt.Sprintf("line %03d", first+i); c != want {
			t.Fatalf("kept line %d = %q, want %q (kept %v)", i, c, want, contents)
		}
	}
	if base := filepath.Base(rotated[0]); !strings.HasPrefix(base, "0.log.2025") || len(base) != len("0.log.20250301-120000") {
		t.Errorf("rotated name %s, want 0.log.<20060102-150405>", base)
	}
}

func TestRotationAtMostOncePerSecond(t *testing.T) {
	var now atomic.Pointer[time.Time]
	now.Store(&epoch)
	w := mustOpen(t, Config{MaxSize: 100, MaxFiles: 5}, func() time.Time { return *now.Load() })
	mustCopy(t, w, Stdout, strings.Repeat("0123456789012345678901234567890123456789\n", 10))
	if rotated, _ := Rotated(w.cfg.Path); len(rotated) != 1 {
		t.Fatalf("rotated files within one second = %v, want 1 (names have one-second resolution)", rotated)
	}
	later := epoch.Add(time.Second)
	now.Store(&later)
	mustCopy(t, w, Stdout, "after a second\n")
	rotated, _ := Rotated(w.cfg.Path)
	if len(rotated) != 2 {
		t.Fatalf("rotated files a second later = %v, want 2", rotated)
	}
	if got := readRecords(t, w.cfg.Path); len(got) != 1 || !strings.HasSuffix(got[0], " after a second\n") {
		t.Errorf("current file = %q, want only the newest record", got)
	}
}

func TestOpenLinksSymlinkToCurrentFile(t *testing.T) {
	dir := t.TempDir()
	path := ContainerPath(filepath.Join(dir, "pods"), "default", "web-node1", "0123", "nginx", 2)
	link := SymlinkPath(filepath.Join(dir, "containers"), "web-node1", "default", "nginx", "abcdef")
	w := mustOpen(t, Config{Path: path, Symlink: link, MaxSize: 50, MaxFiles: 2}, steppingClock(time.Second))
	if target, err := os.Readlink(link); err != nil || target != path {
		t.Fatalf("Readlink(%s) = %q, %v; want %q", link, target, err, path)
	}
	mustCopy(t, w, Stdout, "first line, long enough to rotate\nsecond line, in the new file\n")
	data, err := os.ReadFile(link)
	if err != nil || !bytes.HasSuffix(data, []byte(" second line, in the new file\n")) || bytes.Contains(data, []byte("first")) {
		t.Errorf("read through symlink after rotation = %q, %v; want only the newest record", data, err)
	}
}

func TestOpenAppendsToExistingFile(t *testing.T) {
	w := mustOpen(t, Config{}, steppingClock(time.Second))
	mustCopy(t, w, Stdout, "before\n")
	w.Close()
	w2 := mustOpen(t, Config{Path: w.cfg.Path}, steppingClock(time.Second))
	if got := mustCopy(t, w2, Stderr, "after\n"); len(got) != 2 {
		t.Errorf("records after reopening = %q, want both", got)
	}
}

func TestCopyAfterCloseStillDrains(t *testing.T) {
	w := mustOpen(t, Config{}, nil)
	w.Close()
	src := strings.NewReader(strings.Repeat("x\n", 10000))
	if err := w.Copy(Stdout, src); err == nil {
		t.Error("Copy to a closed writer returned nil, want the write error")
	}
	if src.Len() != 0 {
		t.Error("Copy stopped reading at a write error; the container would block")
	}
}
