package logs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

const (
	// followPollInterval is how often a following Read looks for new records and for a
	// rotation. Polling rather than fsnotify: fsnotify is not a dependency of the module,
	// and a poll needs no watch to move from file to file; it notices a rotation as the
	// path naming another file.
	followPollInterval = 100 * time.Millisecond
	// timestampOutFormat is how Read prints timestamps, the kubelet's RFC3339NanoFixed.
	timestampOutFormat = "2006-01-02T15:04:05.000000000Z07:00"
	// maxJoinedLine bounds the memory of P records being joined; a longer line is
	// printed in pieces of this size, each ended by a newline.
	maxJoinedLine = 1 << 20
	readerBufSize = 64 << 10
)

// ReadOptions selects what Read prints.
type ReadOptions struct {
	Tail       int    // print only the last Tail lines of the file; negative for all
	Follow     bool   // then keep printing new lines, across rotations, until ctx ends
	Timestamps bool   // prefix each line with its time (RFC3339 with nanoseconds)
	Stream     Stream // only this stream; empty for both
}

// line is one line of a container's output, its P records joined.
type line struct {
	time     time.Time // of its first record
	content  []byte
	complete bool // ended by an F record; else the output stopped mid-line
}

// Read prints the container log at path (or a symlink to it) to w: the content of its CRI
// records, P records joined into their line. Records that do not parse are skipped.
// Tail counts lines, not records. With Follow it returns nil when ctx ends, after
// printing what it holds of unfinished lines; when the file is rotated it reads the old
// one to its end and continues with the new one.
func Read(ctx context.Context, path string, opts ReadOptions, w io.Writer) error {
	r, err := open(path, opts, w)
	if err != nil {
		return err
	}
	defer func() { r.f.Close() }()
	var tail *ring
	if opts.Tail >= 0 {
		tail = &ring{size: opts.Tail}
		r.emit = tail.add
	}
	if err := r.readAvailable(); err != nil {
		return err
	}
	if !opts.Follow {
		if err := r.finish(); err != nil {
			return err
		}
	}
	if tail != nil {
		if err := tail.each(r.print); err != nil {
			return err
		}
		r.emit = r.print
	}
	if !opts.Follow {
		return nil
	}
	return r.follow(ctx)
}

// open starts a Read of the log at path (or a symlink to it): its records are emitted to
// w as they are read.
func open(path string, opts ReadOptions, w io.Writer) (*reader, error) {
	path, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("read log: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read log: %w", err)
	}
	r := &reader{path: path, opts: opts, w: w, f: f, br: bufio.NewReaderSize(f, readerBufSize), pending: map[Stream]*line{}}
	r.emit = r.print
	return r, nil
}

// reader is the state of one Read.
type reader struct {
	path    string
	opts    ReadOptions
	w       io.Writer
	f       *os.File
	br      *bufio.Reader
	rest    []byte           // a record not yet ended by '\n'
	pending map[Stream]*line // per stream, the P records of a line not yet ended
	emit    func(line) error // where complete lines go: the output, or the tail ring
}

// follow reads what is appended to the file, and to the files that replace it, until ctx
// ends.
func (r *reader) follow(ctx context.Context) error {
	tick := time.NewTicker(followPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return r.flushPending()
		case <-tick.C:
		}
		if err := r.poll(); err != nil {
			return err
		}
	}
}

// poll reads what was appended since the last poll, and moves on to the file that
// replaced the one being read, if one did.
func (r *reader) poll() error {
	if err := r.readAvailable(); err != nil {
		return err
	}
	if err := r.rewindIfTruncated(); err != nil {
		return err
	}
	return r.switchIfRotated()
}

// rewindIfTruncated starts the file being read over when it is now shorter than what
// was read of it: someone truncated it in place (logrotate's copytruncate, or by hand).
// staticpod's writer never does; without this a follower would wait for ever at an
// offset the file no longer reaches.
func (r *reader) rewindIfTruncated() error {
	pos, err := r.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("follow log: %w", err)
	}
	info, err := r.f.Stat()
	if err != nil {
		return fmt.Errorf("follow log: %w", err)
	}
	if info.Size() >= pos-int64(r.br.Buffered()) {
		return nil
	}
	if _, err := r.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("follow log: %w", err)
	}
	r.br.Reset(r.f)
	r.rest = r.rest[:0]
	return r.readAvailable()
}

// switchIfRotated continues with the file now at path once it is another file than the
// one being read. Records are written whole and never to a file after it was rotated,
// so reading the old file to its end first loses nothing; files rotated in between (a
// slow reader may miss several rotations) are read whole before the new one.
func (r *reader) switchIfRotated() error {
	next, err := os.Open(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // removed: nothing more will come unless it is recreated
	}
	if err != nil {
		return fmt.Errorf("follow log: %w", err)
	}
	same, err := sameFile(r.f, next)
	if err == nil && !same {
		err = r.catchUp(next)
	}
	if err != nil || same {
		next.Close()
		return err
	}
	r.use(next)
	return nil
}

// catchUp reads the rest of the current file and the files rotated after it, other
// than next.
func (r *reader) catchUp(next *os.File) error {
	if err := r.readAvailable(); err != nil {
		return err
	}
	missed, err := r.rotatedSince(next)
	if err != nil {
		return err
	}
	for _, name := range missed {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted meanwhile: beyond MaxFiles
		}
		if err != nil {
			return fmt.Errorf("follow log: %w", err)
		}
		r.use(f)
		if err := r.readAvailable(); err != nil {
			return err
		}
	}
	return nil
}

// rotatedSince returns the rotated files newer than the one being read, oldest first,
// leaving out next. If the current file is no longer among them (deleted beyond
// MaxFiles) the newer ones cannot be told apart, and none are returned.
func (r *reader) rotatedSince(next *os.File) ([]string, error) {
	names, err := Rotated(r.path)
	if err != nil {
		return nil, err
	}
	var missed []string
	found := false
	for _, name := range names {
		info, err := os.Stat(name)
		if err != nil {
			continue
		}
		if !found {
			found = isFile(r.f, info)
			continue
		}
		if !isFile(next, info) {
			missed = append(missed, name)
		}
	}
	return missed, nil
}

// use makes f the file being read, closing the previous one.
func (r *reader) use(f *os.File) {
	r.f.Close()
	r.f, r.rest = f, r.rest[:0]
	r.br.Reset(f)
}

// sameFile reports whether a and b are the same file.
func sameFile(a, b *os.File) (bool, error) {
	bi, err := b.Stat()
	if err != nil {
		return false, fmt.Errorf("follow log: %w", err)
	}
	return isFile(a, bi), nil
}

// isFile reports whether f is the file info describes.
func isFile(f *os.File, info os.FileInfo) bool {
	fi, err := f.Stat()
	return err == nil && os.SameFile(fi, info)
}

// readAvailable handles every whole record up to the current end of the file.
func (r *reader) readAvailable() error {
	for {
		chunk, err := r.br.ReadSlice('\n')
		if err == nil {
			rec := chunk
			if len(r.rest) > 0 {
				r.rest = append(r.rest, chunk...)
				rec = r.rest
			}
			if err := r.record(rec); err != nil {
				return err
			}
			r.rest = r.rest[:0]
			continue
		}
		r.rest = append(r.rest, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return fmt.Errorf("read log %s: %w", r.path, err)
		}
	}
}

// finish handles what is left at the end of a file that will not grow: a last record
// without its newline, and lines whose F record never came.
func (r *reader) finish() error {
	if len(r.rest) > 0 {
		if err := r.record(r.rest); err != nil {
			return err
		}
		r.rest = r.rest[:0]
	}
	return r.flushPending()
}

// flushPending emits the lines still waiting for their F record, as they are.
func (r *reader) flushPending() error {
	for _, s := range []Stream{Stdout, Stderr} {
		if l := r.pending[s]; l != nil {
			delete(r.pending, s)
			if err := r.emit(*l); err != nil {
				return err
			}
		}
	}
	return nil
}

// record joins one CRI record into its line, and emits the line once complete.
func (r *reader) record(rec []byte) error {
	rc, ok := parseRecord(rec)
	if !ok || r.opts.Stream != "" && rc.stream != r.opts.Stream {
		return nil
	}
	l := r.pending[rc.stream]
	if l == nil {
		l = &line{time: rc.time}
	}
	l.content = append(l.content, rc.content...)
	if rc.partial && len(l.content) < maxJoinedLine {
		r.pending[rc.stream] = l
		return nil
	}
	delete(r.pending, rc.stream)
	l.complete = true
	return r.emit(*l)
}

// print writes one line to the output.
func (r *reader) print(l line) error {
	var b []byte
	if r.opts.Timestamps {
		b = l.time.AppendFormat(b, timestampOutFormat)
		b = append(b, ' ')
	}
	b = append(b, l.content...)
	if l.complete {
		b = append(b, '\n')
	}
	if _, err := r.w.Write(b); err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	return nil
}

// record is one parsed CRI log record.
type record struct {
	time    time.Time
	stream  Stream
	partial bool
	content []byte // without the record's '\n'; aliases the input
}

// parseRecord parses `<RFC3339Nano> <stream> <tag>[:<more tags>] <content>\n`.
func parseRecord(rec []byte) (record, bool) {
	rec = bytes.TrimSuffix(rec, []byte{'\n'})
	ts, rest, ok1 := bytes.Cut(rec, []byte{' '})
	stream, rest, ok2 := bytes.Cut(rest, []byte{' '})
	tags, content, ok3 := bytes.Cut(rest, []byte{' '})
	if !ok1 || !ok2 || !ok3 {
		return record{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	s := Stream(stream)
	if err != nil || s != Stdout && s != Stderr {
		return record{}, false
	}
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	return record{time: t, stream: s, partial: string(tag) == string(tagPartial), content: content}, true
}

// ring keeps the last size lines given to add. Lines own their content.
type ring struct {
	size  int
	lines []line
	next  int // index of the oldest line once full
}

func (r *ring) add(l line) error {
	if r.size == 0 {
		return nil
	}
	if len(r.lines) < r.size {
		r.lines = append(r.lines, l)
		return nil
	}
	r.lines[r.next] = l
	r.next = (r.next + 1) % r.size
	return nil
}

// each calls fn for the kept lines, oldest first.
func (r *ring) each(fn func(line) error) error {
	for i := range r.lines {
		if err := fn(r.lines[(r.next+i)%len(r.lines)]); err != nil {
			return err
		}
	}
	return nil
}
