package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/api/apitest"
	"github.com/staticpod/staticpod/internal/testenv"
)

// runAsMain makes the test binary staticpod itself when a test runs it under that
// name: the completion scripts call the binary back.
const runAsMain = "STATICPOD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// staticpodOnPath returns a directory holding this test binary as `staticpod`, to
// put first on PATH.
func staticpodOnPath(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "staticpod")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// script returns what `staticpod completion SHELL` prints.
func script(t *testing.T, shell string) string {
	t.Helper()
	var out bytes.Buffer
	app := newApp()
	app.Writer = &out
	if err := app.Run([]string{"staticpod", "completion", shell}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// complete sources the bash script in a bash of its own and completes line (the
// cursor at its end) as bash does at a Tab: COMP_WORDS and COMP_CWORD set, the
// function `complete -p staticpod` names called; it returns COMPREPLY.
func complete(t *testing.T, bin, socket, line string) []string {
	t.Helper()
	words := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + w + "'"
	}
	prog := script(t, "bash") + `
fn=$(complete -p staticpod | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
[ -n "$fn" ] || { echo "complete -p names no function" >&2; exit 1; }
COMP_WORDS=(` + strings.Join(quoted, " ") + `)
COMP_CWORD=` + strconv.Itoa(len(words)-1) + `
COMP_LINE=` + "'" + line + "'" + `
COMP_POINT=${#COMP_LINE}
"$fn" staticpod "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
`
	cmd := exec.CommandContext(t.Context(), "bash", "--norc", "--noprofile", "-c", prog)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), runAsMain+"=1", "STATICPOD_API_SOCKET="+socket)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("complete %q: %v\n%s", line, err, stderr.String())
	}
	var reply []string
	for _, w := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if w != "" {
			reply = append(reply, w)
		}
	}
	slices.Sort(reply)
	return reply
}

// TestBashCompletionCompletesCommandsFlagsAndPods drives the script of `staticpod
// completion bash` through bash's completion machinery against a fake daemon holding
// two pods, and against none.
func TestBashCompletionCompletesCommandsFlagsAndPods(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		if testenv.Required() {
			t.Fatal("no bash (CI=true): the completion script is bash's")
		}
		t.Skip("no bash")
	}
	bin := staticpodOnPath(t)
	fake := apitest.NewServer(t, []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-node1"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-node1"}},
	})
	noDaemon := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		line, socket string
		want         []string
	}{
		{"staticpod lo", fake.Socket, []string{"logs"}}, // not the hidden logger
		{"staticpod comp", fake.Socket, []string{"completion"}},
		{"staticpod completion ", fake.Socket, []string{"bash", "fish", "zsh"}},
		{"staticpod ps --o", fake.Socket, []string{"--output"}},
		{"staticpod logs --ta", fake.Socket, []string{"--tail"}},
		{"staticpod logs ", fake.Socket, []string{"kube-system/etcd-node1", "web-node1"}},
		{"staticpod logs w", fake.Socket, []string{"web-node1"}},
		{"staticpod describe kube", fake.Socket, []string{"kube-system/etcd-node1"}},
		{"staticpod exec -i w", fake.Socket, []string{"web-node1"}},
		{"staticpod describe web-node1 ", fake.Socket, nil}, // one POD only
		{"staticpod wait --for condition=Ready web-node1 k", fake.Socket, []string{"kube-system/etcd-node1"}},
		{"staticpod top ", fake.Socket, []string{"kube-system/etcd-node1", "web-node1"}},
		{"staticpod logs ", noDaemon, nil}, // quietly nothing
		{"staticpod logs --fo", noDaemon, []string{"--follow"}},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got := complete(t, bin, tc.socket, tc.line)
			if !slices.Equal(got, tc.want) {
				t.Errorf("complete %q = %q, want %q", tc.line, got, tc.want)
			}
		})
	}
	t.Run("every visible command", func(t *testing.T) {
		got := complete(t, bin, fake.Socket, "staticpod ")
		for _, c := range newApp().VisibleCommands() {
			if !slices.Contains(got, c.Name) {
				t.Errorf("complete %q = %q, lacks %s", "staticpod ", got, c.Name)
			}
		}
		for _, hidden := range []string{"pause", "logger"} {
			if slices.Contains(got, hidden) {
				t.Errorf("complete %q offers the hidden %s", "staticpod ", hidden)
			}
		}
	})
}
