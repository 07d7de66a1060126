package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/dirlock"
	"github.com/staticpod/staticpod/runner"
)

// withFlag returns args with flag's value replaced by value.
func withFlag(args []string, flag, value string) []string {
	out := slices.Clone(args)
	i := slices.Index(out, flag)
	if i < 0 || i+1 >= len(out) {
		panic("no flag " + flag)
	}
	out[i+1] = value
	return out
}

// A second staticpod on the root dir or the pod log dir of a running one, with a
// containerd namespace of its own (a typo, a test instance), would remove the first
// one's pod directories and logs as those of pods that are gone. It stops at once,
// naming the directory and the first one's PID, and touches nothing: the first one's
// emptyDir data and logs stay, and its pod runs on, never restarted.
func TestASecondDaemonOnTheSameDirectoriesTouchesNothing(t *testing.T) {
	n := newNode(t)
	first := n.start()
	n.write("keeper.yaml", strings.Replace(podManifest("keeper", "Always",
		"echo kept > /data/file; echo logged; trap 'exit 0' TERM; while true; do sleep 0.1; done", "  volumes: [{name: data, emptyDir: {}}]\n"),
		"    command:", "    volumeMounts: [{name: data, mountPath: /data}]\n    command:", 1))
	before := n.await("keeper running", time.Minute, running("keeper-node1/main/0"))["keeper-node1/main/0"]
	data := filepath.Join(n.path("root"), "pods", string(before.PodUID), "volumes", "data", "file")
	log := filepath.Join(n.path("log/pods"), "default_keeper-node1_"+string(before.PodUID), "main", "0.log")
	awaitFile(t, data, "kept")
	awaitFile(t, log, "logged")

	for _, tc := range []struct {
		name   string
		root   string
		logs   string
		locked string // the directory the second daemon finds locked
	}{
		{"same root dir and log dir", n.path("root"), n.path("log/pods"), n.path("root")},
		{"same root dir, another log dir", n.path("root"), n.path("other/log/pods"), n.path("root")},
		{"another root dir, same log dir", n.path("other/root"), n.path("log/pods"), n.path("log/pods")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := n.runArgs()
			for flag, value := range map[string]string{
				"--containerd-namespace": n.d.Namespace(t), "--api-socket": n.path("second.sock"),
				"--root-dir": tc.root, "--pod-log-dir": tc.logs, "--container-log-dir": n.path("other/log/containers"),
			} {
				args = withFlag(args, flag, value)
			}
			second := n.launch(binary, append(args, "--cni-conf-dir", ""))
			select {
			case <-second.exited:
			case <-time.After(20 * time.Second):
				t.Errorf("the second daemon still runs beside the first:\n%s", second.out)
				second.stop()
			}
			out := second.out.String()
			if code := second.cmd.ProcessState.ExitCode(); code == 0 {
				t.Errorf("the second daemon exited 0, want a failure")
			}
			for _, want := range []string{fmt.Sprintf("%s is in use: process %d holds its lock %s", tc.locked, first.cmd.Process.Pid, filepath.Join(tc.locked, dirlock.FileName))} {
				if !strings.Contains(out, want) {
					t.Errorf("the second daemon's output does not say %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "staticpod started") || strings.Contains(out, "started containerd") {
				t.Errorf("the second daemon went on after the lock:\n%s", out)
			}
		})
	}

	n.awaitRelists(3) // the first daemon would have noticed anything gone
	if got, err := os.ReadFile(data); err != nil || string(got) != "kept\n" {
		t.Errorf("the first daemon's emptyDir after the second daemons: %q, %v", got, err)
	}
	if got, err := os.ReadFile(log); err != nil || !strings.Contains(string(got), "logged") {
		t.Errorf("the first daemon's pod log after the second daemons: %q, %v", got, err)
	}
	cs := n.containers()
	if after := cs["keeper-node1/main/0"]; after.State != runner.StateRunning || after.PID != before.PID || len(cs) != 1 {
		t.Errorf("the first daemon's pod after the second daemons: %v, pid %d -> %d; it must run on untouched", summary(cs), before.PID, after.PID)
	}
}

// podEntries lists the entries of a root dir's or pod log dir's directory but the lock
// staticpod holds there.
func podEntries(dir string) []os.DirEntry {
	entries, _ := os.ReadDir(dir)
	return slices.DeleteFunc(entries, func(e os.DirEntry) bool { return e.Name() == dirlock.FileName })
}
