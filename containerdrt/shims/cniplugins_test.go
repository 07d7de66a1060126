package shims

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/staticpod/staticpod/internal/proc"
	"github.com/staticpod/staticpod/internal/testenv"
)

// A CNI plugin that a killed staticpod left running for a sandbox is ended before the
// sandbox's network is torn down; plugins of other sandboxes, and processes that only
// carry the sandbox's ID in their environment without being a plugin, are left alone.
func TestEndPluginRunsKillsOnlyThePluginsOfTheSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		if testenv.Required() {
			t.Fatal("needs root, to read other processes' environments (CI=true)")
		}
		t.Skip("needs root")
	}
	binDir := t.TempDir()
	plugin := filepath.Join(binDir, "bridge")
	copyFile(t, "/bin/sleep", plugin)
	start := func(exe, id string) *exec.Cmd {
		cmd := exec.Command(exe, "60")
		cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=" + id, "CNI_NETNS=/proc/1/ns/net"}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	ours := start(plugin, "p01-node1_0_17df6bd6")
	other := start(plugin, "p02-node1_0_aaaaaaaa")
	notAPlugin := start("/bin/sleep", "p01-node1_0_17df6bd6")
	exited := make(chan error, 1)
	go func() { exited <- ours.Wait() }()

	killed := EndPluginRuns(proc.Root, "p01-node1_0_17df6bd6", []string{binDir})
	if !slices.Equal(killed, []int{ours.Process.Pid}) {
		t.Fatalf("killed %v, want only the sandbox's plugin, %d", killed, ours.Process.Pid)
	}
	var exit *exec.ExitError
	if err := <-exited; !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the sandbox's plugin ended with %v, want killed", err)
	}
	for _, c := range []*exec.Cmd{other, notAPlugin} {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("process %d (%s) is gone: %v", c.Process.Pid, c.Path, err)
		}
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
