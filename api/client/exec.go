package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/staticpod/staticpod/api/wire"
)

// ExecOptions are the streams and the terminal of a command Exec runs. The zero value
// runs it with no input and its output dropped.
type ExecOptions struct {
	Stdin  io.Reader // nil: no input; its end closes the command's input (without TTY)
	Stdout io.Writer
	Stderr io.Writer // unused with TTY: the terminal carries both streams
	TTY    bool
	Size   *wire.TermSize       // the terminal's size at start, with TTY
	Resize <-chan wire.TermSize // the terminal's later sizes, with TTY
}

// ExecError is a command that did not run to its end: it could not start in the
// container, or was cut off. Code is the exit code a shell would give it: 127 for a
// command not found, 126 for one that could not start otherwise, -1 for anything else.
type ExecError struct {
	Code    int
	Message string
}

func (e *ExecError) Error() string { return e.Message }

// Exec runs command in a running container of a pod (POST /exec/..., upgraded to
// wire.ExecProtocol) and returns its exit code once it exited and all its output was
// written. When ctx is done the connection is closed and the daemon kills the command.
// A container that does not run is an *APIError (HTTP 409); a command that did not run
// to its end an *ExecError.
//
// Exec does not wait for a Read of opts.Stdin in progress when the command ends: that
// read's data is dropped, and the goroutine copying the input ends with it.
func (c *Client) Exec(ctx context.Context, namespace, name, container string, command []string, opts ExecOptions) (int, error) {
	conn, err := c.upgrade(ctx, podPath("/exec", namespace, name)+"/"+url.PathEscape(container), execQuery(command, opts))
	if err != nil {
		return -1, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() }) // ends the read below
	defer stop()

	out := wire.NewFrameWriter(conn)
	done := make(chan struct{})
	defer close(done)
	if opts.Stdin != nil {
		go sendInput(out, opts.Stdin)
	}
	if opts.TTY && opts.Resize != nil {
		go sendSizes(out, opts.Resize, done)
	}
	code, err := readOutput(conn, opts)
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	return code, err
}

func execQuery(command []string, opts ExecOptions) url.Values {
	q := url.Values{"command": command}
	if opts.Stdin != nil {
		q.Set("stdin", "true")
	}
	if opts.TTY {
		q.Set("tty", "true")
		if opts.Size != nil {
			q.Set("width", strconv.Itoa(int(opts.Size.Width)))
			q.Set("height", strconv.Itoa(int(opts.Size.Height)))
		}
	}
	return q
}

// upgrade sends POST path?query asking to switch to wire.ExecProtocol, and returns the
// connection once the daemon did. Any other answer becomes an *APIError.
func (c *Client) upgrade(ctx context.Context, path string, query url.Values) (io.ReadWriteCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path+"?"+query.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", path, err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", wire.ExecProtocol)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.dialError(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("request %s: the upgraded connection cannot be written", path)
	}
	return conn, nil
}

// sendInput sends in as the command's input, then its end.
func sendInput(out *wire.FrameWriter, in io.Reader) {
	if _, err := io.Copy(out.Channel(wire.ChannelStdin), in); err != nil {
		return // the stream is gone, or the input broke: the command's input stays open
	}
	_ = out.WriteFrame(wire.ChannelClose, nil)
}

// sendSizes sends each terminal size from resize until done is closed.
func sendSizes(out *wire.FrameWriter, resize <-chan wire.TermSize, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case size := <-resize:
			data, _ := json.Marshal(size)
			if out.WriteFrame(wire.ChannelResize, data) != nil {
				return
			}
		}
	}
}

// readOutput writes the command's output where opts say until the status that ends the
// stream, and returns its exit code.
func readOutput(conn io.Reader, opts ExecOptions) (int, error) {
	for {
		channel, payload, err := wire.ReadFrame(conn)
		if errors.Is(err, io.EOF) {
			return -1, errors.New("exec: the daemon closed the stream before the command's exit status")
		}
		if err != nil {
			return -1, fmt.Errorf("exec: read the stream: %w", err)
		}
		var w io.Writer
		switch channel {
		case wire.ChannelStdout:
			w = opts.Stdout
		case wire.ChannelStderr:
			w = opts.Stderr
		case wire.ChannelStatus:
			var st wire.ExecStatus
			if err := json.Unmarshal(payload, &st); err != nil {
				return -1, fmt.Errorf("exec: decode the exit status: %w", err)
			}
			if st.Error != "" {
				return st.ExitCode, &ExecError{Code: st.ExitCode, Message: st.Error}
			}
			return st.ExitCode, nil
		}
		if w != nil {
			if _, err := w.Write(payload); err != nil {
				return -1, fmt.Errorf("exec: write the command's output: %w", err)
			}
		}
	}
}
