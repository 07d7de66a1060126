package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type frame struct {
	Channel byte
	Payload string
}

// readAll reads frames until the stream ends, and returns them with the error that
// ended it.
func readAll(r io.Reader) ([]frame, error) {
	var frames []frame
	for {
		ch, p, err := ReadFrame(r)
		if err != nil {
			return frames, err
		}
		frames = append(frames, frame{ch, string(p)})
	}
}

func TestFramesReadBackAsWritten(t *testing.T) {
	long := strings.Repeat("x", MaxFrame+10)
	tests := []struct {
		name  string
		write []frame
		want  []frame
	}{
		{"one frame per write", []frame{{ChannelStdout, "out\n"}, {ChannelStderr, "err\n"}, {ChannelStatus, `{"exitCode":7}`}},
			[]frame{{ChannelStdout, "out\n"}, {ChannelStderr, "err\n"}, {ChannelStatus, `{"exitCode":7}`}}},
		{"an empty frame stays one", []frame{{ChannelClose, ""}}, []frame{{ChannelClose, ""}}},
		{"a long write is split at MaxFrame", []frame{{ChannelStdin, long}},
			[]frame{{ChannelStdin, long[:MaxFrame]}, {ChannelStdin, long[MaxFrame:]}}},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		w := NewFrameWriter(&buf)
		for _, f := range tt.write {
			if err := w.WriteFrame(f.Channel, []byte(f.Payload)); err != nil {
				t.Fatalf("%s: WriteFrame: %v", tt.name, err)
			}
		}
		got, err := readAll(&buf)
		if !errors.Is(err, io.EOF) {
			t.Errorf("%s: the stream ended with %v, want io.EOF between frames", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: frames read (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestBrokenStreamsAreErrors(t *testing.T) {
	tests := []struct {
		name   string
		stream []byte
		want   error
	}{
		{"cut in the header", []byte{ChannelStdout, 0, 0}, io.ErrUnexpectedEOF},
		{"cut in the payload", []byte{ChannelStdout, 0, 0, 0, 4, 'a', 'b'}, io.ErrUnexpectedEOF},
		{"a length over MaxFrame", []byte{ChannelStdout, 0xff, 0xff, 0xff, 0xff}, ErrFrameTooLarge},
		{"a plain HTTP answer", []byte("HTTP/1.1 404 Not Found\r\n"), ErrFrameTooLarge},
	}
	for _, tt := range tests {
		if _, _, err := ReadFrame(bytes.NewReader(tt.stream)); !errors.Is(err, tt.want) {
			t.Errorf("ReadFrame(%s) = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// TestConcurrentWritersKeepFramesWhole writes on two channels from two goroutines at
// once, as a command's stdout and stderr are copied, and checks that every frame reads
// back whole and in each channel's order.
func TestConcurrentWritersKeepFramesWhole(t *testing.T) {
	var buf bytes.Buffer
	w := NewFrameWriter(&buf)
	const n = 200
	var wg sync.WaitGroup
	for _, ch := range []byte{ChannelStdout, ChannelStderr} {
		wg.Go(func() {
			out := w.Channel(ch)
			for i := range n {
				if _, err := out.Write([]byte(strings.Repeat(string(rune('a'+ch)), i+1))); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	frames, err := readAll(&buf)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("read: %v", err)
	}
	next := map[byte]int{}
	for _, f := range frames {
		next[f.Channel]++
		if want := strings.Repeat(string(rune('a'+f.Channel)), next[f.Channel]); f.Payload != want {
			t.Fatalf("frame %d of channel %d = %q, want %q", next[f.Channel], f.Channel, f.Payload, want)
		}
	}
	if next[ChannelStdout] != n || next[ChannelStderr] != n {
		t.Errorf("read %v frames per channel, want %d each", next, n)
	}
}
