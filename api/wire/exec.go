package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ExecProtocol is what an exec request asks to switch to (the Upgrade header of POST
// /exec/{namespace}/{name}/{container}). Once the daemon answers 101 Switching
// Protocols, both sides speak frames on the connection: a channel byte, the payload's
// length as a big-endian uint32, the payload. The channels are numbered as the
// kubelet's remote command channels are.
const ExecProtocol = "staticpod-exec.v1"

// Channels of an exec stream.
const (
	ChannelStdin  byte = 0   // client to daemon: the command's input
	ChannelStdout byte = 1   // daemon to client: its output (with a terminal, all of it)
	ChannelStderr byte = 2   // daemon to client: its error output
	ChannelStatus byte = 3   // daemon to client, last: an ExecStatus as JSON
	ChannelResize byte = 4   // client to daemon: the terminal's new TermSize as JSON
	ChannelClose  byte = 255 // client to daemon, empty: the end of the input
)

// MaxFrame bounds a frame's payload: WriteFrame splits longer writes, ReadFrame refuses
// longer frames.
const MaxFrame = 32 << 10

// ErrFrameTooLarge is a frame whose length is over MaxFrame: the stream is not an exec
// stream, or is corrupt.
var ErrFrameTooLarge = errors.New("exec frame too large")

// ExecStatus ends an exec stream: the command's exit code or why it did not run to
// its end. Error is set when the command could not start, or was cut off (the
// container is gone, the daemon stops); ExitCode is then 127 for a command not found
// in the container, 126 for one that could not be started otherwise, as shells
// answer, and -1 for anything else.
type ExecStatus struct {
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error,omitempty"`
}

// Exit codes of an ExecStatus whose command did not start.
const (
	ExitCannotRun = 126
	ExitNotFound  = 127
)

// headerLen is a frame header's length: the channel, the payload's length.
const headerLen = 5

// ReadFrame reads the next frame of an exec stream. It returns io.EOF only when the
// stream ended between two frames; one cut off within a frame is
// io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader) (channel byte, payload []byte, err error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("read exec frame of channel %d: %w (%d bytes, at most %d)", h[0], ErrFrameTooLarge, n, MaxFrame)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return h[0], payload, nil
}

// FrameWriter writes whole frames to an exec stream from any number of goroutines.
type FrameWriter struct {
	mu sync.Mutex // guards w: a frame is written whole
	w  io.Writer
}

// NewFrameWriter returns a FrameWriter on w.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

// WriteFrame writes p on channel, in frames of at most MaxFrame bytes; an empty p is
// one empty frame.
func (f *FrameWriter) WriteFrame(channel byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		chunk := p[:min(len(p), MaxFrame)]
		buf := make([]byte, headerLen+len(chunk))
		buf[0] = channel
		binary.BigEndian.PutUint32(buf[1:], uint32(len(chunk)))
		copy(buf[headerLen:], chunk)
		if _, err := f.w.Write(buf); err != nil {
			return err
		}
		p = p[len(chunk):]
		if len(p) == 0 {
			return nil
		}
	}
}

// Channel returns a writer whose every Write is written on channel.
func (f *FrameWriter) Channel(channel byte) io.Writer { return channelWriter{f, channel} }

type channelWriter struct {
	f       *FrameWriter
	channel byte
}

func (c channelWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // an empty frame would mean something else on some channels
	}
	if err := c.f.WriteFrame(c.channel, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
