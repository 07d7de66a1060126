package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/api/client"
	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/runner"
)

// fakeExecer runs pretend commands, chosen by their first word, in the container
// "web-main" only.
type fakeExecer struct {
	canceled chan error // what ctx said when a command was ended by it
	started  chan struct{}
}

func newFakeExecer() *fakeExecer {
	return &fakeExecer{canceled: make(chan error, 1), started: make(chan struct{}, 1)}
}

func (f *fakeExecer) Exec(ctx context.Context, id string, req runner.ExecRequest) (int, error) {
	if id != "web-main" {
		return -1, fmt.Errorf("exec in %s: not found", id)
	}
	switch req.Command[0] {
	case "echo": // echo out; echo err >&2; exit 7
		fmt.Fprintln(req.Stdout, "out")
		fmt.Fprintln(req.Stderr, "err")
		return 7, nil
	case "cat":
		if req.Stdin == nil {
			return 1, nil
		}
		_, err := io.Copy(req.Stdout, req.Stdin)
		return 0, err
	case "size": // print the terminal's size at start, then its first change
		if !req.TTY || req.Size == nil {
			return 1, nil
		}
		fmt.Fprintf(req.Stdout, "%dx%d\n", req.Size.Width, req.Size.Height)
		select {
		case s := <-req.Resize:
			fmt.Fprintf(req.Stdout, "%dx%d\n", s.Width, s.Height)
			return 0, nil
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	case "sleep": // until ctx ends it
		f.started <- struct{}{}
		<-ctx.Done()
		f.canceled <- ctx.Err()
		return -1, ctx.Err()
	}
	return -1, fmt.Errorf("exec in %s: OCI runtime exec failed: exec failed: unable to start container process: exec: %q: executable file not found in $PATH", id, req.Command[0])
}

// execPods are a pod whose container runs and one whose container is being created.
func execPods() []*corev1.Pod {
	web := pod("default", "web-node1", corev1.PodRunning, "main")
	web.Status.ContainerStatuses[0].ContainerID = "containerd://web-main"
	etcd := pod("kube-system", "etcd-node1", corev1.PodPending, "etcd")
	etcd.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	return []*corev1.Pod{web, etcd}
}

// execServer serves execPods with a fakeExecer on a socket and, with listen, on TCP with
// the token (none when empty). It returns the TCP base URL, if any.
func execServer(t *testing.T, f *fakeExecer, listen bool, token string) (socket, base string) {
	t.Helper()
	cfg := testConfig(newFakeBackend(execPods()...), nil)
	cfg.Exec = f
	cfg.Socket = socketPath(t)
	if listen {
		cfg.Listen = "127.0.0.1:0"
	}
	if token != "" {
		cfg.TokenFile = filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(cfg.TokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := mustNew(t, cfg)
	mustRun(t, s)
	if listen {
		base = "http://" + s.tcpAddr.String()
	}
	return cfg.Socket, base
}

// execResult is what one exec through the client gave.
type execResult struct {
	Code           int
	Stdout, Stderr string
	Err            string
}

// runExec runs command through c and returns what it gave, with Exec's error.
func runExec(ctx context.Context, c *client.Client, pod, container string, opts client.ExecOptions, command ...string) (execResult, error) {
	var out, errOut bytes.Buffer
	opts.Stdout, opts.Stderr = &out, &errOut
	code, err := c.Exec(ctx, "default", pod, container, command, opts)
	r := execResult{Code: code, Stdout: out.String(), Stderr: errOut.String()}
	if err != nil {
		r.Err = err.Error()
	}
	return r, err
}

func httptestRecord(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestExecCarriesStreamsTerminalAndExitCode(t *testing.T) {
	socket, _ := execServer(t, newFakeExecer(), false, "")
	c := client.New(socket)
	resize := make(chan wire.TermSize, 1)
	resize <- wire.TermSize{Width: 100, Height: 30}
	tests := []struct {
		name    string
		opts    client.ExecOptions
		command []string
		want    execResult
	}{
		{"output apart, exit code", client.ExecOptions{}, []string{"echo"}, execResult{Code: 7, Stdout: "out\n", Stderr: "err\n"}},
		{"input to its end", client.ExecOptions{Stdin: strings.NewReader("piped in\n")}, []string{"cat"}, execResult{Stdout: "piped in\n"}},
		{"no input asked", client.ExecOptions{}, []string{"cat"}, execResult{Code: 1}},
		{"a long input", client.ExecOptions{Stdin: strings.NewReader(strings.Repeat("y", 3*wire.MaxFrame+1))}, []string{"cat"},
			execResult{Stdout: strings.Repeat("y", 3*wire.MaxFrame+1)}},
		{"terminal size and a resize", client.ExecOptions{TTY: true, Size: &wire.TermSize{Width: 80, Height: 24}, Resize: resize}, []string{"size"},
			execResult{Stdout: "80x24\n100x30\n"}},
		{"command not found", client.ExecOptions{}, []string{"nope"}, execResult{Code: wire.ExitNotFound,
			Err: `exec in web-main: OCI runtime exec failed: exec failed: unable to start container process: exec: "nope": executable file not found in $PATH`}},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		got, _ := runExec(ctx, c, "web-node1", "main", tt.opts, tt.command...)
		cancel()
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("exec %s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestExecRefusesWhatItCannotRun(t *testing.T) {
	s := mustNew(t, testConfig(newFakeBackend(execPods()...), nil))
	s.cfg.Exec = newFakeExecer()
	upgrade := func(target string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, target, nil)
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", wire.ExecProtocol)
		return r
	}
	plain, _ := http.NewRequest(http.MethodPost, "/exec/default/web-node1/main?command=sh", nil)
	tests := []struct {
		name   string
		req    *http.Request
		code   int
		reason metav1.StatusReason
		msg    string
	}{
		{"no upgrade", plain, http.StatusUpgradeRequired, metav1.StatusReasonBadRequest, "Upgrade: " + wire.ExecProtocol},
		{"no command", upgrade("/exec/default/web-node1/main"), http.StatusBadRequest, metav1.StatusReasonBadRequest, "command"},
		{"a bad size", upgrade("/exec/default/web-node1/main?command=sh&tty=1&width=80"), http.StatusBadRequest, metav1.StatusReasonBadRequest, "width"},
		{"no such pod", upgrade("/exec/default/nope/main?command=sh"), http.StatusNotFound, metav1.StatusReasonNotFound, `pods "nope" not found`},
		{"no such container", upgrade("/exec/default/web-node1/db?command=sh"), http.StatusNotFound, metav1.StatusReasonNotFound,
			`container "db" not found in pod "default/web-node1"; its containers are: main`},
		{"a container that does not run", upgrade("/exec/kube-system/etcd-node1/etcd?command=sh"), http.StatusConflict, metav1.StatusReasonConflict,
			"container etcd of pod kube-system/etcd-node1 is not running (Waiting: CrashLoopBackOff)"},
	}
	for _, tt := range tests {
		rec := httptestRecord(s.Handler(), tt.req)
		if rec.Code != tt.code {
			t.Errorf("%s: %s = %d %s, want %d", tt.name, tt.req.URL, rec.Code, rec.Body, tt.code)
			continue
		}
		var st metav1.Status
		decodeJSON(t, rec.Body.Bytes(), &st)
		if st.Reason != tt.reason || !strings.Contains(st.Message, tt.msg) {
			t.Errorf("%s: status = %s %q, want %s with %q", tt.name, st.Reason, st.Message, tt.reason, tt.msg)
		}
	}

	off := mustNew(t, testConfig(newFakeBackend(execPods()...), nil))
	rec := httptestRecord(off.Handler(), upgrade("/exec/default/web-node1/main?command=sh"))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "exec is not enabled") {
		t.Errorf("exec on a server without an Execer = %d %s, want 404", rec.Code, rec.Body)
	}
}

func TestExecOverTCPNeedsTheToken(t *testing.T) {
	_, base := execServer(t, newFakeExecer(), true, "s3cret")
	_, open := execServer(t, newFakeExecer(), true, "")
	tests := []struct {
		name, base, token string
		want              string // the error; "" for a command that ran
	}{
		{"the token", base, "s3cret", ""},
		{"no token", base, "", "(HTTP 401)"},
		{"a wrong token", base, "s3cre", "(HTTP 401)"},
		{"a daemon without a token file", open, "", "needs a bearer token, and this daemon has no --api-token-file"},
	}
	for _, tt := range tests {
		c, err := client.NewURL(tt.base, tt.token)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		got, err := runExec(ctx, c, "web-node1", "main", client.ExecOptions{}, "echo")
		cancel()
		var apiErr *client.APIError
		switch {
		case tt.want == "" && (got.Err != "" || got.Code != 7 || got.Stdout != "out\n"):
			t.Errorf("exec over TCP with %s = %+v, want exit 7 and its output", tt.name, got)
		case tt.want != "" && (!strings.Contains(got.Err, tt.want) || !errors.As(err, &apiErr) || apiErr.Code != http.StatusUnauthorized):
			t.Errorf("exec over TCP with %s = %+v (%v), want refused 401: %s", tt.name, got, err, tt.want)
		}
	}
}

func TestExecEndsTheCommandWhenTheClientGoes(t *testing.T) {
	f := newFakeExecer()
	socket, _ := execServer(t, f, false, "")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := client.New(socket).Exec(ctx, "default", "web-node1", "main", []string{"sleep"}, client.ExecOptions{})
		done <- err
	}()
	select {
	case <-f.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not start within 30s")
	}
	cancel()
	select {
	case err := <-f.canceled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the command ended with %v, want its context canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the command still runs 30s after its client went")
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Exec = %v, want context.Canceled", err)
	}
}

func TestExecStatusGivesAShellsExitCodes(t *testing.T) {
	tests := []struct {
		code int
		err  error
		want wire.ExecStatus
	}{
		{3, nil, wire.ExecStatus{ExitCode: 3}},
		{-1, errors.New(`exec failed: unable to start container process: exec: "x": executable file not found in $PATH`),
			wire.ExecStatus{ExitCode: 127, Error: `exec failed: unable to start container process: exec: "x": executable file not found in $PATH`}},
		{-1, errors.New("exec failed: unable to start container process: exec: /bin/x: no such file or directory"),
			wire.ExecStatus{ExitCode: 127, Error: "exec failed: unable to start container process: exec: /bin/x: no such file or directory"}},
		{-1, errors.New("exec failed: unable to start container process: exec: /etc: permission denied"),
			wire.ExecStatus{ExitCode: 126, Error: "exec failed: unable to start container process: exec: /etc: permission denied"}},
		{-1, errors.New("exec in abc: container not found"), wire.ExecStatus{ExitCode: -1, Error: "exec in abc: container not found"}},
	}
	for _, tt := range tests {
		if got := execStatus(tt.code, tt.err); got != tt.want {
			t.Errorf("execStatus(%d, %v) = %+v, want %+v", tt.code, tt.err, got, tt.want)
		}
	}
}

func TestExecOutlivesTimeoutsAndEndsAtShutdown(t *testing.T) {
	f := newFakeExecer()
	cfg := testConfig(newFakeBackend(execPods()...), nil)
	cfg.Exec, cfg.Socket = f, socketPath(t)
	s := mustNew(t, cfg)
	s.timeouts.read, s.timeouts.write = 200*time.Millisecond, 200*time.Millisecond
	stop := mustRun(t, s)
	c := client.New(cfg.Socket)

	// cat, fed a line, then another past the timeouts, echoes both.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		code, err := c.Exec(t.Context(), "default", "web-node1", "main", []string{"cat"}, client.ExecOptions{Stdin: inR, Stdout: outW})
		if err == nil && code != 0 {
			err = fmt.Errorf("exit %d", code)
		}
		outW.Close()
		done <- err
	}()
	lines := readLines(outR)
	fmt.Fprintln(inW, "before")
	if line := <-lines; line != "before" {
		t.Fatalf("cat echoed %q, want before", line)
	}
	// The session must outlast the connection's read and write timeouts, so this waits
	// past them: a time, not a state, is what is tested.
	<-time.After(3 * s.timeouts.write)
	fmt.Fprintln(inW, "after")
	if line := <-lines; line != "after" {
		t.Errorf("cat echoed %q past the server's timeouts, want after", line)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Errorf("exec cat: %v", err)
	}

	go func() {
		_, err := c.Exec(t.Context(), "default", "web-node1", "main", []string{"sleep"}, client.ExecOptions{})
		done <- err
	}()
	select {
	case <-f.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not start within 30s")
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	select {
	case <-f.canceled:
	case <-time.After(30 * time.Second):
		t.Fatal("the command still runs 30s after the server stopped")
	}
	var execErr *client.ExecError
	if err := <-done; !errors.As(err, &execErr) || execErr.Code != -1 {
		t.Errorf("Exec of a command the server's stop cut off = %v, want an *ExecError of code -1", err)
	}
}
