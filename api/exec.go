package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/runner"
)

// Execer runs a command in a running container, by the runtime's container ID, and
// returns its exit code; runner.Runtime implementations do. ctx bounds the command:
// when it is done the command is killed.
type Execer interface {
	Exec(ctx context.Context, id string, req runner.ExecRequest) (int, error)
}

// execDrainTimeout bounds how long an exec stream whose command ended is kept open for
// the client to read the status and hang up. Closing at once, with input of the client
// still unread, could reset the connection before the client read the status.
const execDrainTimeout = 5 * time.Second

// execQuery is what POST /exec/{namespace}/{name}/{container} asks, as the kubelet's
// exec takes it: command (repeated, one per argument), stdin, tty, and the terminal's
// size at start (width, height).
type execQuery struct {
	command    []string
	stdin, tty bool
	size       *runner.TermSize
}

func parseExecQuery(q url.Values) (execQuery, error) {
	var eq execQuery
	eq.command = q["command"]
	if len(eq.command) == 0 || eq.command[0] == "" {
		return eq, errors.New("command: give the command and its arguments, one command= per argument")
	}
	var err error
	if eq.stdin, err = boolParam(q, "stdin"); err != nil {
		return eq, err
	}
	if eq.tty, err = boolParam(q, "tty"); err != nil {
		return eq, err
	}
	if q.Get("width") == "" && q.Get("height") == "" {
		return eq, nil
	}
	w, werr := strconv.ParseUint(q.Get("width"), 10, 16)
	h, herr := strconv.ParseUint(q.Get("height"), 10, 16)
	if werr != nil || herr != nil {
		return eq, fmt.Errorf("width=%q, height=%q: want both, in characters", q.Get("width"), q.Get("height"))
	}
	eq.size = &runner.TermSize{Width: uint16(w), Height: uint16(h)}
	return eq, nil
}

// exec answers POST /exec/{namespace}/{name}/{container}?command=...: it runs the
// command in the container, which must be running, and once the client's upgrade to
// wire.ExecProtocol is accepted, carries the command's input, output, terminal size and
// exit status as frames on the connection. Errors found before the command starts are
// answered as the other routes answer them (404 for no such pod or container, 409 for
// a container that does not run).
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Exec == nil {
		writeNotFoundMsg(w, "exec", "", "exec is not enabled on this server")
		return
	}
	q, err := parseExecQuery(r.URL.Query())
	if err != nil {
		writeBadRequest(w, err.Error())
		return
	}
	if !upgradesTo(r, wire.ExecProtocol) {
		w.Header().Set("Upgrade", wire.ExecProtocol)
		w.Header().Set("Connection", "Upgrade")
		writeStatus(w, http.StatusUpgradeRequired, metav1.StatusReasonBadRequest,
			"exec needs a connection upgrade: send Connection: Upgrade and Upgrade: "+wire.ExecProtocol)
		return
	}
	container := r.PathValue("container")
	pod, ok := s.podContainer(w, r)
	if !ok {
		return
	}
	id, err := runningID(pod, container)
	if err != nil {
		writeStatus(w, http.StatusConflict, metav1.StatusReasonConflict, err.Error())
		return
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeInternal(w, fmt.Sprintf("exec: take over the connection: %v", err))
		return
	}
	log := s.log.With("pod", podRef(pod), "container", container)
	log.Info("exec", "command", q.command[0], "stdin", q.stdin, "tty", q.tty, "remote", r.RemoteAddr)
	s.serveExec(conn, buf, id, q, log)
}

// upgradesTo reports whether r asks to switch to protocol.
func upgradesTo(r *http.Request, protocol string) bool {
	upgrade := false
	for _, v := range r.Header.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			upgrade = upgrade || strings.EqualFold(strings.TrimSpace(tok), "upgrade")
		}
	}
	return upgrade && strings.EqualFold(r.Header.Get("Upgrade"), protocol)
}

// runningID returns the runtime's ID of the pod's container, when it runs.
func runningID(pod *corev1.Pod, container string) (string, error) {
	cs := containerStatus(pod, container)
	_, id, ok := strings.Cut(cs.ContainerID, "://")
	if cs.State.Running == nil || !ok || id == "" {
		return "", fmt.Errorf("container %s of pod %s is not running (%s)", container, podRef(pod), stateWord(cs.State))
	}
	return id, nil
}

// stateWord says what a container that does not run is doing: Waiting: CrashLoopBackOff.
func stateWord(st corev1.ContainerState) string {
	switch {
	case st.Terminated != nil && st.Terminated.Reason != "":
		return "Terminated: " + st.Terminated.Reason
	case st.Terminated != nil:
		return "Terminated: ExitCode:" + strconv.Itoa(int(st.Terminated.ExitCode))
	case st.Waiting != nil && st.Waiting.Reason != "":
		return "Waiting: " + st.Waiting.Reason
	}
	return "Waiting"
}

// serveExec accepts the upgrade on conn, runs the command and carries its streams until
// it exits, the client hangs up (which kills it) or the server stops (which kills it
// too). buf holds what the client sent after its request, if anything.
func (s *Server) serveExec(conn net.Conn, buf *bufio.ReadWriter, id string, q execQuery, log *slog.Logger) {
	defer conn.Close() // Hijack lifted the server's read and write timeouts: they do not bound a session
	if _, err := fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", wire.ExecProtocol); err != nil {
		log.Debug("exec: answer the upgrade", "err", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()

	out := wire.NewFrameWriter(conn)
	req := runner.ExecRequest{Command: q.command, Stdout: out.Channel(wire.ChannelStdout), Stderr: out.Channel(wire.ChannelStderr), TTY: q.tty}
	var stdinR *io.PipeReader
	var stdin *io.PipeWriter
	if q.stdin {
		stdinR, stdin = io.Pipe()
		req.Stdin = stdinR
	}
	resize := make(chan runner.TermSize, 1)
	if q.tty {
		req.Size, req.Resize = q.size, resize
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		readExecFrames(buf.Reader, stdin, resize)
		cancel() // the client hung up, or broke the stream: the command goes with it
	}()

	code, err := s.cfg.Exec.Exec(ctx, id, req)
	if stdinR != nil {
		stdinR.Close() // ends the runtime's copy of the input and frees the reader's writes to it
	}
	status := execStatus(code, err)
	if err != nil {
		log.Info("exec ended", "err", err)
	} else {
		log.Debug("exec ended", "exitCode", code)
	}
	data, _ := json.Marshal(status)
	if err := out.WriteFrame(wire.ChannelStatus, data); err != nil {
		log.Debug("exec: send the exit status", "err", err)
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	select { // the client reads the status and hangs up
	case <-read:
	case <-time.After(execDrainTimeout):
	}
}

// readExecFrames reads the client's frames until the stream ends: input goes to stdin
// (nil: input is dropped), the end of input closes it, and resizes go to resize, the
// newest replacing one not yet taken.
func readExecFrames(r io.Reader, stdin *io.PipeWriter, resize chan runner.TermSize) {
	defer func() {
		if stdin != nil {
			stdin.CloseWithError(io.ErrUnexpectedEOF)
		}
	}()
	for {
		channel, payload, err := wire.ReadFrame(r)
		if err != nil {
			return
		}
		switch channel {
		case wire.ChannelStdin:
			if stdin != nil {
				if _, err := stdin.Write(payload); err != nil {
					stdin = nil // the command's input is closed: drop the rest
				}
			}
		case wire.ChannelClose:
			if stdin != nil {
				stdin.Close()
				stdin = nil
			}
		case wire.ChannelResize:
			var size runner.TermSize
			if json.Unmarshal(payload, &size) != nil {
				continue
			}
			select {
			case <-resize: // the newest size wins
			default:
			}
			resize <- size
		}
	}
}

// execStatus is the status that ends an exec stream: the exit code, or why the command
// did not run to its end, with the exit code a shell would give a command that could
// not start.
func execStatus(code int, err error) wire.ExecStatus {
	if err == nil {
		return wire.ExecStatus{ExitCode: code}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "executable file not found") || strings.Contains(msg, "exec failed") && strings.Contains(msg, "no such file"):
		code = wire.ExitNotFound
	case strings.Contains(msg, "exec failed"):
		code = wire.ExitCannotRun
	default:
		code = -1
	}
	return wire.ExecStatus{ExitCode: code, Error: msg}
}
