package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

func TestRunFollowsTheManifestDirectory(t *testing.T) {
	n := newNode(t)
	sp := n.start()
	shared := n.path("shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	volume := "  volumes: [{name: shared, hostPath: {path: " + shared + "}}]\n"
	mount := func(m string) string {
		return strings.Replace(m, "    command:", "    volumeMounts: [{name: shared, mountPath: /shared}]\n    command:", 1)
	}
	// Each version of the pod appends its name to a shared file while it runs; if the
	// new one started before the old one stopped, their lines would interleave.
	writer := func(version string) string {
		return mount(podManifest("web", "Always", "echo hello from "+version+"; trap 'exit 0' TERM; while true; do echo "+version+" >> /shared/order; sleep 0.05; done", volume))
	}
	n.write("web.yaml", writer("v1"))
	cs := n.await("web v1 running", time.Minute, running("web-node1/main/0"))
	v1 := cs["web-node1/main/0"]
	awaitFile(t, v1.LogPath, "stdout F hello from v1")

	for _, junk := range []string{"web.yaml.swp", "web.yaml~", ".web.yaml.swx", "web.yaml.bak", "4913"} {
		if err := os.WriteFile(filepath.Join(n.manifests, junk), []byte(writer("junk")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n.write("web.yaml", writer("v2"))
	cs = n.await("web v2 running and v1 gone", time.Minute, func(cs map[string]runner.Container) bool {
		c, ok := cs["web-node1/main/0"]
		return ok && c.ID != v1.ID && c.State == runner.StateRunning && len(cs) == 1
	})
	v2 := cs["web-node1/main/0"]
	if v2.PodUID == v1.PodUID {
		t.Fatal("an edit kept the pod's UID")
	}
	awaitFile(t, filepath.Join(shared, "order"), "v2")
	order, _ := os.ReadFile(filepath.Join(shared, "order"))
	lines := strings.Fields(string(order))
	firstV2 := slices.Index(lines, "v2")
	if firstV2 < 0 || slices.Contains(lines[firstV2:], "v1") {
		t.Errorf("the new pod ran while the old one still did:\n%s", order)
	}
	if strings.Contains(string(order), "junk") {
		t.Errorf("a swap or backup file ran as a pod:\n%s", order)
	}

	// Two files defining the same pod: the first in sorted order runs, and the
	// conflict is reported.
	n.write("a-first.yaml", podManifest("twin", "Always", "sleep 3600"))
	n.write("b-second.yaml", podManifest("twin", "Always", "sleep 7200"))
	n.await("one twin", time.Minute, running("twin-node1/main/0"))
	sp.awaitLog("b-second.yaml: pod default/twin-node1 is already defined in " + filepath.Join(n.manifests, "a-first.yaml"))
	twins := 0
	for key := range n.containers() {
		if strings.HasPrefix(key, "twin-") {
			twins++
		}
	}
	if twins != 1 {
		t.Errorf("%d containers for a pod defined in two files, want 1", twins)
	}

	if err := os.Remove(filepath.Join(n.manifests, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	n.await("web removed", time.Minute, func(cs map[string]runner.Container) bool {
		_, ok := cs["web-node1/main/0"]
		return !ok
	})
	// The pod's data and logs go right after its last container.
	testenv.Await(t, "the removed pod's logs gone after its last container", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Dir(v2.LogPath))
		return os.IsNotExist(err)
	})
}

func TestRunRestartsWithBackoffAndFinishesJobs(t *testing.T) {
	n := newNode(t)
	n.start()
	n.write("crash.yaml", podManifest("crash", "Always", "sleep 3600"))
	n.write("ok.yaml", podManifest("ok", "OnFailure", "exit 0"))
	n.write("fail.yaml", podManifest("fail", "Never", "exit 3"))
	n.write("retry.yaml", strings.Replace(podManifest("retry", "OnFailure", "test -e /data/x || { touch /data/x; exit 1; }",
		"  volumes: [{name: data, emptyDir: {}}]\n"), "    command:", "    volumeMounts: [{name: data, mountPath: /data}]\n    command:", 1))

	first := n.await("crash running", time.Minute, running("crash-node1/main/0"))["crash-node1/main/0"]
	if err := syscall.Kill(int(first.PID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	second := n.await("crash restarted", time.Minute, running("crash-node1/main/1"))["crash-node1/main/1"]
	if took := time.Since(killed); took > 5*time.Second {
		t.Errorf("the first restart took %v; it should be at once", took)
	}
	if err := syscall.Kill(int(second.PID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = time.Now()
	n.await("crash restarted after its back-off", time.Minute, running("crash-node1/main/2"))
	if took := time.Since(killed); took < 8*time.Second {
		t.Errorf("the second restart came after %v; it should wait its 10 s back-off", took)
	}

	cs := n.await("jobs finished", time.Minute, func(cs map[string]runner.Container) bool {
		return exited("ok-node1/main/0")(cs) && exited("fail-node1/main/0")(cs) && exited("retry-node1/main/1")(cs)
	})
	if cs["ok-node1/main/0"].ExitCode != 0 || cs["fail-node1/main/0"].ExitCode != 3 || cs["retry-node1/main/1"].ExitCode != 0 {
		t.Errorf("exit codes: %v", summary(cs))
	}
	// The daemon saw them finish, then relisted a few times, each waking their workers:
	// nothing finished may start again.
	n.awaitPhase("ok-node1", corev1.PodSucceeded)
	n.awaitPhase("fail-node1", corev1.PodFailed)
	n.awaitPhase("retry-node1", corev1.PodSucceeded)
	n.awaitRelists(5)
	for _, again := range []string{"ok-node1/main/1", "fail-node1/main/1", "retry-node1/main/2"} {
		if _, ok := n.containers()[again]; ok {
			t.Errorf("%s started: a finished pod ran again", again)
		}
	}
}

func TestRunKeepsPodsOnBrokenEdits(t *testing.T) {
	n := newNode(t)
	sp := n.start()
	n.write("etcd.yaml", podManifest("etcd", "Always", "sleep 3600"))
	before := n.await("etcd running", time.Minute, running("etcd-node1/main/0"))["etcd-node1/main/0"]
	n.write("etcd.yaml", strings.Replace(podManifest("etcd", "Always", "sleep 3601"), "image:", "imag:", 1))
	sp.awaitLog("spec.containers[0].image: Required value")
	n.awaitRelists(5) // each wakes the pod's worker: the broken edit must not reach it
	if now := n.containers()["etcd-node1/main/0"]; now.ID != before.ID || now.PID != before.PID || now.State != runner.StateRunning {
		t.Fatalf("a broken edit disturbed the running pod: %+v", now)
	}
	n.write("etcd.yaml", podManifest("etcd", "Always", "sleep 3602"))
	n.await("the fixed spec applied", time.Minute, func(cs map[string]runner.Container) bool {
		c := cs["etcd-node1/main/0"]
		return c.ID != before.ID && c.State == runner.StateRunning
	})
	sp.awaitLog("manifest is valid again")
}

func TestRunAdoptsAfterKill9(t *testing.T) {
	n := newNode(t)
	sp := n.start()
	n.write("etcd.yaml", podManifest("etcd", "Always", "sleep 3600"))
	n.write("api.yaml", podManifest("api", "Always", "sleep 3600", "  hostNetwork: true\n"))
	first := n.await("pods running", time.Minute, func(cs map[string]runner.Container) bool {
		return running("etcd-node1/main/0")(cs) && running("api-node1/main/0")(cs)
	})
	c := first["etcd-node1/main/0"]
	if err := syscall.Kill(int(c.PID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	before := n.await("etcd restarted once", time.Minute, running("etcd-node1/main/1"))
	sp.kill9()

	sp = n.start()
	sp.awaitLog("staticpod started")
	n.awaitRelists(3) // the runner converges within 2 relists: watch a third
	after := n.containers()
	for _, key := range []string{"etcd-node1/main/1", "api-node1/main/0"} {
		if after[key].PID != before[key].PID || after[key].State != runner.StateRunning {
			t.Errorf("%s: pid %d -> %d (%s); an adopted container must keep running untouched", key, before[key].PID, after[key].PID, after[key].State)
		}
	}
	if len(after) != len(before) {
		t.Errorf("containers before the restart %v, after %v", summary(before), summary(after))
	}
}

// A second daemon started by mistake on the same node fails (the first one holds the
// root dir's lock) before it acts on anything, and on its way out it never stops the
// first one's pods, even with --stop-pods-on-exit.
func TestASecondDaemonLeavesThePodsAlone(t *testing.T) {
	n := newNode(t)
	n.start()
	n.write("etcd.yaml", podManifest("etcd", "Always", "sleep 3600"))
	before := n.await("etcd running", time.Minute, running("etcd-node1/main/0"))["etcd-node1/main/0"]
	second := n.start("--stop-pods-on-exit")
	select {
	case <-second.exited:
	case <-time.After(time.Minute):
		t.Fatal("the second daemon still runs beside the first")
	}
	if !strings.Contains(second.out.String(), "is another staticpod running on it?") {
		t.Errorf("the second daemon did not say why it stopped:\n%s", second.out)
	}
	if after := n.containers()["etcd-node1/main/0"]; after.State != runner.StateRunning || after.PID != before.PID {
		t.Errorf("etcd after the second daemon: %s, pid %d -> %d; it must run on untouched", after.State, before.PID, after.PID)
	}
	if strings.Contains(second.out.String(), "staticpod started") {
		t.Errorf("the second daemon started before it found the root dir taken:\n%s", second.out)
	}
}

// A daemon told to stop while containerd has not answered yet stops as at any other
// time, at once and without an error: nothing ran, and containerd is not at fault.
// once stops with the signal's exit code and says so, as it already did.
func TestStoppedWhileContainerdIsSilent(t *testing.T) {
	dir := t.TempDir()
	flags := []string{"--root-dir", filepath.Join(dir, "root"), "--pod-log-dir", filepath.Join(dir, "log/pods")}
	out, code := stopWhileContainerdIsSilent(t, append([]string{"run", "--pod-manifest-path", filepath.Join(dir, "manifests"), "--cni-conf-dir", "",
		"--container-log-dir", filepath.Join(dir, "log/containers"), "--api-socket", filepath.Join(dir, "staticpod.sock"),
		"--device-plugin-dir", ""}, flags...))
	if code != 0 || strings.Contains(out, "is containerd running?") {
		t.Errorf("run stopped while containerd is silent: exit %d, want 0 and no word of containerd:\n%s", code, out)
	}
	manifests := filepath.Join(dir, "once")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(manifests, "job.yaml"), []byte(podManifest("job", "Never", "true")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = stopWhileContainerdIsSilent(t, append([]string{"once"}, append(flags, manifests)...))
	if code != 128+int(syscall.SIGTERM) || !strings.Contains(out, "staticpod once: terminated") || strings.Contains(out, "is containerd running?") {
		t.Errorf("once stopped while containerd is silent: exit %d, want %d and why:\n%s", code, 128+int(syscall.SIGTERM), out)
	}
}

// stopWhileContainerdIsSilent runs staticpod with args and --containerd-address at a
// socket that accepts and never answers, sends SIGTERM once staticpod dialled it, and
// returns its output and exit code.
func stopWhileContainerdIsSilent(t *testing.T, args []string) (string, int) {
	t.Helper()
	mute := filepath.Join(t.TempDir(), "mute.sock")
	l, err := net.Listen("unix", mute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dialled := make(chan struct{})
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if held = append(held, c); len(held) == 1 {
				close(dialled)
			}
		}
	}()
	cmd := exec.Command(binary, append([]string{args[0], "--containerd-address", mute}, args[1:]...)...)
	var out testenv.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-dialled:
		time.Sleep(100 * time.Millisecond) // waiting for containerd's answer
	case <-exited:
		t.Fatalf("%v: exited before it dialled containerd\n%s", args[0], out.String())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%v: no dial of containerd in 30 s\n%s", args[0], out.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return out.String(), cmd.ProcessState.ExitCode()
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%v: no exit 10 s after SIGTERM\n%s", args[0], out.String())
		return "", 0
	}
}
