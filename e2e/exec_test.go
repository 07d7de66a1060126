package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	spcli "github.com/staticpod/staticpod/cli"
)

// TestExecNeedsOnlyTheAPI runs `staticpod exec` with nothing but the daemon's address:
// over the socket and over TCP with the token, with input, output apart, exit codes and
// a terminal that follows the local one's size; and over TCP without the token, refused.
func TestExecNeedsOnlyTheAPI(t *testing.T) {
	n := newNode(t)
	const token = "e2e-exec-token"
	tokenFile := n.path("token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeTCPAddr(t)
	n.start("--listen", addr, "--api-token-file", tokenFile)
	n.write("web.yaml", podManifest("web", "Always", "trap 'exit 0' TERM; while true; do sleep 0.1; done"))
	n.await("web running", time.Minute, running("web-node1/main/0"))
	n.awaitPhase("web-node1", corev1.PodRunning) // the API may answer a moment after containerd

	// Nothing of containerd in the environment: exec must not need it.
	env := []string{"STATICPOD_CONTAINERD_ADDRESS=/nowhere", "STATICPOD_CONTAINERD_NAMESPACE=nowhere", "STATICPOD_ROOT_DIR=/nowhere"}
	for _, api := range [][]string{
		{"--api-socket", n.path("staticpod.sock")},
		{"--server", "http://" + addr, "--token-file", tokenFile},
	} {
		args := append(append([]string{"exec"}, api...), "web-node1", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
		if out, errOut, code := runSplit(t, "", env, args...); code != 7 || out != "out\n" || errOut != "err\n" {
			t.Errorf("exec %v: exit %d, stdout %q, stderr %q; want 7, out, err", api, code, out, errOut)
		}
		args = append(append([]string{"exec"}, api...), "web-node1", "-i", "--", "cat")
		if out, errOut, code := runSplit(t, "piped in\n", env, args...); code != 0 || out != "piped in\n" {
			t.Errorf("exec %v -i cat: exit %d, stdout %q, stderr %q", api, code, out, errOut)
		}
		args = append(append([]string{"exec"}, api...), "web-node1", "--", "no-such-command")
		if _, errOut, code := runSplit(t, "", env, args...); code != spcli.ExitNotFound {
			t.Errorf("exec %v no-such-command: exit %d (%s), want 127", api, code, errOut)
		}
	}

	args := []string{"exec", "--server", "http://" + addr, "web-node1", "--", "true"}
	if _, errOut, code := runSplit(t, "", env, args...); code != spcli.ExitInvalid || !strings.Contains(errOut, "HTTP 401") {
		t.Errorf("exec over TCP without the token: exit %d, %q; want 1 and HTTP 401", code, errOut)
	}
	if code, body := tcpDo(t, http.MethodPost, addr, "/exec/default/web-node1/main?command=true", "", ""); code != http.StatusUnauthorized {
		t.Errorf("POST /exec over TCP without the token = %d %s, want 401", code, body)
	}

	execWithTerminal(t, n, env)
}

// execWithTerminal runs `staticpod exec -ti` on a pseudo-terminal of 24x80, which it
// then resizes to 30x100: the command's terminal must start at the first size and
// follow to the second (stty size inside the container), and the end of input (^D)
// must end the command.
func execWithTerminal(t *testing.T, n *node, env []string) {
	ptm, pts := openPTY(t)
	setSize(t, ptm, 24, 80)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "exec", "--api-socket", n.path("staticpod.sock"), "-ti", "web-node1", "--",
		"sh", "-c", "stty size; while read x; do stty size; done")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true} // SIGWINCH comes to it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(ptm)
		for sc.Scan() {
			lines <- strings.TrimRight(sc.Text(), "\r")
		}
	}()
	// await reads the terminal until stty prints want (true) or another size (false).
	size := regexp.MustCompile(`^[0-9]+ [0-9]+$`)
	await := func(want string) bool {
		for {
			select {
			case line, ok := <-lines:
				switch {
				case !ok:
					t.Errorf("exec -ti: the terminal closed before %q", want)
					return false
				case line == want:
					return true
				case size.MatchString(line):
					return false
				}
			case <-ctx.Done():
				t.Errorf("exec -ti: no %q within the deadline", want)
				return false
			}
		}
	}
	if !await("24 80") {
		t.Fatal("exec -ti: the command's terminal did not start at the local size 24x80")
	}
	setSize(t, ptm, 30, 100)
	// The resize travels beside the input: each newline asks stty again, until the
	// new size has come.
	followed := false
	for range 50 {
		if _, err := ptm.Write([]byte("\n")); err != nil {
			t.Fatal(err)
		}
		if followed = await("30 100"); followed || ctx.Err() != nil {
			break
		}
	}
	if !followed {
		t.Error("exec -ti: the command's terminal did not follow the local one to 30x100")
	}
	if _, err := ptm.Write([]byte{4}); err != nil { // ^D: the end of input
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exec -ti after ^D: %v, want exit 0", err)
	}
	for range lines { // the terminal closes with the command
	}
}

// openPTY opens a pseudo-terminal pair: its master and its slave.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	num, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", num), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptm, pts
}

func setSize(t *testing.T, ptm *os.File, rows, cols uint16) {
	t.Helper()
	if err := unix.IoctlSetWinsize(int(ptm.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatalf("resize pty: %v", err)
	}
}
