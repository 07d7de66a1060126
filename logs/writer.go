package logs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Stream names the output a record came from.
type Stream string

// The streams of a container, as CRI log records name them.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Record tags: F ends a line, P is one part of a line that continues in the next record
// of the same stream.
const (
	tagFull    = 'F'
	tagPartial = 'P'
)

// readBufSize is how much of a stream is read at a time, containerd CRI's default.
const readBufSize = 4096

var errClosed = errors.New("log writer closed")

// Writer writes the output of one container to its CRI log file and rotates the file. Its
// streams are copied concurrently (one Copy per stream) into the one file.
type Writer struct {
	cfg Config
	now func() time.Time // clock for timestamps and rotated names; tests replace it

	// mu guards the open file and its rotation (f, size, lastRotation). Each record
	// is formatted and written whole under it, so records of the two streams never
	// interleave within a line, appear in timestamp order, and never straddle a rotation.
	mu           sync.Mutex
	f            *os.File // nil once closed
	size         int64    // bytes in f
	lastRotation string   // the rotated name last tried; rotation is tried once per name
}

// Open opens (appending) or creates cfg.Path and its directories, and points cfg.Symlink
// at it when set.
func Open(cfg Config) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("open log %s: %w", cfg.Path, err)
	}
	cfg = cfg.withDefaults()
	f, err := openFile(cfg.Path)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open log %s: %w", cfg.Path, err)
	}
	if cfg.Symlink != "" {
		if err := linkAtomically(cfg.Path, cfg.Symlink); err != nil {
			f.Close()
			return nil, err
		}
	}
	return &Writer{cfg: cfg, now: time.Now, f: f, size: info.Size()}, nil
}

// Prepare checks c and creates its log file and directories, so that a caller can find
// out before a logger starts that it will be able to write.
func (c Config) Prepare() error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("prepare log %s: %w", c.Path, err)
	}
	f, err := openFile(c.Path)
	if err != nil {
		return err
	}
	f.Close()
	return nil
}

// openFile opens path for appending, creating it and its directories.
func openFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, fileMode)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	return f, nil
}

// Copy writes r, one stream of the container, as CRI records until r ends, exactly as
// containerd CRI does: each line becomes an F record without its "\n" (or "\r\n"); a line
// longer than MaxLineSize becomes P records of MaxLineSize bytes and a final F; output
// that ends without a newline becomes a last P record.
//
// Copy never stops reading because a write failed: a container must not block on a full
// pipe because its log cannot be written. It returns the first write error once r ends.
// The end of r is io.EOF or a read deadline (os.ErrDeadlineExceeded), which the logger
// uses to stop draining.
func (w *Writer) Copy(stream Stream, r io.Reader) error {
	limit := w.cfg.MaxLineSize
	br := bufio.NewReaderSize(r, min(readBufSize, limit))
	var line, record []byte // the current line's unwritten content; a reused record buffer
	var werr error
	emit := func(tag byte, content []byte) {
		var err error
		record, err = w.writeRecord(record, stream, tag, content)
		if werr == nil {
			werr = err
		}
	}
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		ended, final := err == nil, err != nil && err != bufio.ErrBufferFull
		if ended {
			line = trimEOL(line)
		}
		// A '\r' that may yet be followed by '\n' is held back, so that a "\r\n" is
		// dropped whole even when a split falls between the two bytes.
		hold := 0
		if !ended && !final && len(line) > 0 && line[len(line)-1] == '\r' {
			hold = 1
		}
		for len(line)-hold > limit {
			emit(tagPartial, line[:limit])
			line = line[:copy(line, line[limit:])]
		}
		switch {
		case ended:
			emit(tagFull, line)
			line = line[:0]
		case !final:
			continue
		default:
			if len(line) > 0 {
				emit(tagPartial, line)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded) {
				return werr
			}
			return errors.Join(fmt.Errorf("read %s: %w", stream, err), werr)
		}
	}
}

// trimEOL drops the "\n" that ends line, and a '\r' before it.
func trimEOL(line []byte) []byte {
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}

// writeRecord formats `<time> <stream> <tag> <content>\n` into buf and writes it, rotating
// first when the record would take the file beyond MaxSize. It returns buf for reuse.
func (w *Writer) writeRecord(buf []byte, stream Stream, tag byte, content []byte) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return buf, errClosed
	}
	now := w.now()
	buf = now.AppendFormat(buf[:0], time.RFC3339Nano)
	buf = append(buf, ' ')
	buf = append(buf, stream...)
	buf = append(buf, ' ', tag, ' ')
	buf = append(buf, content...)
	buf = append(buf, '\n')
	var rotateErr error
	if w.cfg.MaxSize > 0 && w.size > 0 && w.size+int64(len(buf)) > w.cfg.MaxSize {
		rotateErr = w.rotate(now)
	}
	n, err := w.f.Write(buf)
	w.size += int64(n)
	if err != nil {
		err = fmt.Errorf("write log %s: %w", w.cfg.Path, err)
	}
	return buf, errors.Join(rotateErr, err)
}

// Close closes the file. Copy must have returned.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("close log %s: %w", w.cfg.Path, err)
	}
	return nil
}
