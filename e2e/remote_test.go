package e2e

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/internal/testenv"
)

// remote is how a client command reaches a daemon: its flags and its environment.
type remote struct {
	name string
	args []string
	env  []string
}

// cliResult is what one command printed and its exit code.
type cliResult struct {
	stdout, stderr string
	code           int
}

// ages are the relative times the commands print (5s, 3m2s, 4h), which differ from one
// run of a command to the next.
var ages = regexp.MustCompile(`\b([0-9]+[dhms])+\b`)

// spaces are the runs of blanks that align a table's columns, which move as an age
// gains a digit.
var spaces = regexp.MustCompile(`[ \t]+`)

// usage is what describe says a pod and its containers use, which changes with each
// sample.
var usage = regexp.MustCompile(`cpu [^,\n]+, memory [^ \n]+`)

// unaged is out with its ages and usage masked and its columns' alignment undone.
func unaged(out string) string {
	out = usage.ReplaceAllString(ages.ReplaceAllString(out, "<age>"), "cpu <usage>, memory <usage>")
	return spaces.ReplaceAllString(out, " ")
}

// The commands that read or act give the same output and exit codes over the socket,
// over TCP with the token, and over TLS with the token and the CA, from flags or from
// the environment; a missing or wrong token, an unknown CA and plain http to the TLS
// listener are refused with what to do.
func TestCLIWorksTheSameOverTheSocketTCPAndTLS(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	plain, secure := newNode(t), newNode(t)
	tokenFile := plain.path("token")
	if err := os.WriteFile(tokenFile, []byte("e2e-remote-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongToken := plain.path("wrong-token")
	if err := os.WriteFile(wrongToken, []byte("e2e-wrong-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plainAddr, tlsAddr := freeTCPAddr(t), freeTCPAddr(t)
	plain.start("--listen", plainAddr, "--api-token-file", tokenFile)
	secure.start("--listen", tlsAddr, "--api-token-file", tokenFile, "--tls-cert-file", files.Cert, "--tls-private-key-file", files.Key)
	for _, n := range []*node{plain, secure} {
		// web prints what is moved to /tmp/say, for logs -f to see a new line.
		n.write("web.yaml", podManifest("web", "Always",
			"trap 'exit 0' TERM; echo hello from web; while true; do if [ -f /tmp/say ]; then cat /tmp/say; rm /tmp/say; fi; sleep 0.1; done"))
		n.write("job.yaml", podManifest("job", "Never", "echo done"))
		n.awaitPhase("web-node1", corev1.PodRunning)
		n.awaitPhase("job-node1", corev1.PodSucceeded)
		awaitLogLine(t, n, "/containerLogs/default/web-node1/main", "hello from web")
	}
	socket := func(n *node) remote {
		return remote{name: "the socket", args: []string{"--api-socket", n.path("staticpod.sock")}}
	}
	tcp := remote{name: "TCP with the token", args: []string{"--server", "http://" + plainAddr, "--token-file", tokenFile}}
	tlsFlags := remote{name: "TLS with the token and the CA", args: []string{"--server", "https://" + tlsAddr, "--token-file", tokenFile, "--certificate-authority", files.CA}}
	tlsEnv := remote{name: "TLS from the environment", env: []string{"STATICPOD_SERVER=https://" + tlsAddr, "STATICPOD_TOKEN_FILE=" + tokenFile,
		"STATICPOD_CERTIFICATE_AUTHORITY=" + files.CA}}

	for _, daemon := range []struct {
		n       *node
		remotes []remote
	}{
		{plain, []remote{socket(plain), tcp}},
		{secure, []remote{socket(secure), tlsFlags, tlsEnv}},
	} {
		// Commands whose output does not change with their runs, compared at once.
		var want map[string]cliResult
		for _, r := range daemon.remotes {
			got := map[string]cliResult{}
			for _, cmd := range []struct {
				name, stdin string
				args        []string
			}{
				{"ps", "", []string{"ps"}},
				{"describe", "", []string{"describe", "web-node1"}},
				{"describe of a missing pod", "", []string{"describe", "web"}},
				{"logs", "", []string{"logs", "web-node1"}},
				{"exec -i", "piped in\n", []string{"exec", "-i", "web-node1", "--", "sh", "-c", "cat; echo err >&2; exit 3"}},
				{"exec of a missing command", "", []string{"exec", "web-node1", "--", "no-such-command"}},
				{"images", "", []string{"images"}},
				{"wait for a Ready pod", "", []string{"wait", "--for=condition=Ready", "--timeout", "0", "web-node1"}},
				{"wait for a finished pod", "", []string{"wait", "--for=condition=Ready", "--timeout", "0", "job-node1"}},
			} {
				out, errOut, code := runSplit(t, cmd.stdin, r.env, withRemote(cmd.args, r.args)...)
				got[cmd.name] = cliResult{unaged(out), unaged(errOut), code}
			}
			if want == nil {
				want = got
				checkSocketResults(t, got)
				continue
			}
			for name, w := range want {
				if g := got[name]; g != w {
					t.Errorf("%s over %s = exit %d, stdout %q, stderr %q; over the socket exit %d, stdout %q, stderr %q",
						name, r.name, g.code, g.stdout, g.stderr, w.code, w.stdout, w.stderr)
				}
			}
		}
		for _, r := range daemon.remotes {
			if code := followSeesANewLine(t, r, "a new line over "+r.name); code != 0 {
				t.Errorf("logs -f over %s, interrupted: exit %d, want 0", r.name, code)
			}
			out, code := execOnATerminal(t, r)
			if code != 5 || !strings.Contains(out, "got hi") || !strings.Contains(out, "24 80") {
				t.Errorf("exec -ti over %s: exit %d, terminal %q; want 5, the input and the size 24 80", r.name, code, out)
			}
			// top's figures change from one sample to the next: it is compared by its
			// shape, once the sampler has seen the pod.
			var top string
			testenv.Await(t, "top over "+r.name+" to show web-node1", 30*time.Second, func() bool {
				out, _, code := runSplit(t, "", r.env, withRemote([]string{"top", "--no-headers", "web-node1"}, r.args)...)
				top = out
				return code == 0 && strings.HasPrefix(out, "web-node1 ")
			})
			if fields := strings.Fields(top); len(fields) != 3 || !strings.HasSuffix(fields[2], "Mi") {
				t.Errorf("top over %s printed %q; want web-node1, its CPU and its memory in Mi", r.name, top)
			}
		}
	}

	const noToken = "a valid bearer token is required: send Authorization: Bearer <token from --api-token-file> (give the API token with --token-file) (HTTP 401)"
	https, http := "https://"+tlsAddr, "http://"+tlsAddr
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"TCP without the token", []string{"--server", "http://" + plainAddr}, spcli.ExitInvalid, noToken},
		{"TCP with a wrong token", []string{"--server", "http://" + plainAddr, "--token-file", wrongToken}, spcli.ExitInvalid, noToken},
		{"TLS without the token", []string{"--server", https, "--certificate-authority", files.CA}, spcli.ExitInvalid, noToken},
		{"TLS with a wrong token", []string{"--server", https, "--certificate-authority", files.CA, "--token-file", wrongToken}, spcli.ExitInvalid, noToken},
		{"TLS with an unknown CA", []string{"--server", https, "--certificate-authority", testenv.NewTLSFiles(t).CA, "--token-file", tokenFile}, spcli.ExitUsage,
			"has a certificate this client does not trust: x509: certificate signed by unknown authority"},
		{"TLS trusting the system's CAs", []string{"--server", https, "--token-file", tokenFile}, spcli.ExitUsage,
			"x509: certificate signed by unknown authority; give the CA that signed it with --certificate-authority (or STATICPOD_CERTIFICATE_AUTHORITY)"},
		{"plain http to the TLS listener", []string{"--server", http, "--token-file", tokenFile}, spcli.ExitInvalid,
			"Client sent an HTTP request to an HTTPS server. (the daemon serves TLS: use https:// in --server) (HTTP 400)"},
	} {
		for _, cmd := range [][]string{{"ps"}, {"exec", "web-node1", "--", "true"}} {
			out, errOut, code := runSplit(t, "", nil, withRemote(cmd, tt.args)...)
			if code != tt.code || out != "" || !strings.Contains(errOut, tt.want) {
				t.Errorf("%s over %s: exit %d, stdout %q, stderr %q; want %d and %q", cmd[0], tt.name, code, out, errOut, tt.code, tt.want)
			}
		}
	}
}

// withRemote is the command line cmd with the flags of a remote after the command's
// name, where they go before a command exec runs.
func withRemote(cmd, remote []string) []string {
	return append(append([]string{cmd[0]}, remote...), cmd[1:]...)
}

// checkSocketResults checks what the commands gave over the socket, which the other
// ways must give too.
func checkSocketResults(t *testing.T, got map[string]cliResult) {
	t.Helper()
	for name, want := range map[string]cliResult{
		"logs":                      {stdout: "hello from web\n"},
		"exec -i":                   {stdout: "piped in\n", stderr: "err\n", code: 3},
		"wait for a Ready pod":      {stdout: "pod/web-node1 condition met\n"},
		"wait for a finished pod":   {stderr: "wait: condition not met for pods/job-node1\n", code: spcli.ExitInvalid},
		"exec of a missing command": {code: spcli.ExitNotFound},
	} {
		if g := got[name]; g.code != want.code || g.stdout != want.stdout || want.stderr != "" && g.stderr != want.stderr {
			t.Errorf("%s over the socket = exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q",
				name, g.code, g.stdout, g.stderr, want.code, want.stdout, want.stderr)
		}
	}
	for name, part := range map[string]string{"ps": "web-node1 ", "describe": "Name:", "describe of a missing pod": "did you mean web-node1?", "images": e2eImage[len("docker.io/library/"):]} {
		if g := got[name]; !strings.Contains(g.stdout+g.stderr, part) {
			t.Errorf("%s over the socket = exit %d, %q %q; want %q in it", name, g.code, g.stdout, g.stderr, part)
		}
	}
}

// followSeesANewLine runs logs -f through r, has the container print line once the
// follow printed the log so far, awaits it from the follow, which must still run, then
// interrupts it and returns its exit code.
func followSeesANewLine(t *testing.T, r remote, line string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"logs", "-f", "web-node1"}, r.args...)...)
	cmd.Env = append(os.Environ(), r.env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	await := func(want string) bool {
		for {
			select {
			case got, ok := <-lines:
				if !ok {
					return false
				}
				if got == want {
					return true
				}
			case <-ctx.Done():
				return false
			}
		}
	}
	if !await("hello from web") {
		t.Fatalf("logs -f over %s: no first line", r.name)
	}
	say := append(append([]string{"exec", "web-node1"}, r.args...), "--", "sh", "-c", "echo '"+line+"' > /tmp/say.new && mv /tmp/say.new /tmp/say")
	if _, errOut, code := runSplit(t, "", r.env, say...); code != 0 {
		t.Fatalf("exec over %s to print a line: exit %d, %s", r.name, code, errOut)
	}
	if !await(line) {
		t.Errorf("logs -f over %s did not print the new line %q", r.name, line)
	}
	cmd.Process.Signal(syscall.SIGINT)
	go io.Copy(io.Discard, stdout)
	for range lines {
	}
	err = cmd.Wait()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("logs -f over %s: %v", r.name, err)
	}
	return 0
}

// execOnATerminal runs exec -ti through r on a pseudo-terminal of 24x80, types a line
// for the command to read, and returns what the terminal showed and the exit code.
func execOnATerminal(t *testing.T, r remote) (string, int) {
	t.Helper()
	ptm, pts := openPTY(t)
	setSize(t, ptm, 24, 80)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args := append(append([]string{"exec", "-ti", "web-node1"}, r.args...), "--", "sh", "-c", "read x; echo got $x; stty size; exit 5")
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), r.env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	if _, err := ptm.Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(ptm) // until the terminal closes with the command: EIO
	err := cmd.Wait()
	if exit, ok := err.(*exec.ExitError); ok {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("exec -ti over %s: %v", r.name, err)
	}
	return string(out), 0
}
