package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
)

// previousRelease is the commit of the last released staticpod. Its pods have a sandbox
// process (`staticpod pause`) each, whose namespaces their containers join through
// /proc/<pid>/ns; the binary built from the tree under test must adopt such pods.
const previousRelease = "fa6bde1"

// The labels the previous release puts on its sandboxes and containers in containerd.
// They are spelled out rather than taken from containerdrt: they are that release's,
// and the tree under test has to read them whatever it calls its own.
const (
	releaseLabelKind      = "io.staticpod.kind" // sandbox | container
	releaseLabelPod       = "io.staticpod.pod.name"
	releaseLabelContainer = "io.staticpod.container"
	releaseLabelAttempt   = "io.staticpod.attempt"
)

// upgradeSleeper runs until SIGTERM, and ends at once on it.
const upgradeSleeper = "trap 'exit 0' TERM; sleep 3600 & wait"

// upgradePods are the pods the previous release starts, by manifest file: one of each
// kind of sandbox it makes, and a container that has restarted once (flaky exits the
// first time it runs, as the marker in its emptyDir shows).
var upgradePods = map[string]string{
	"solo.yaml": upgradePod("solo", "", "main", upgradeSleeper),
	"duo.yaml": upgradePod("duo", "  volumes: [{name: data, emptyDir: {}}]\n",
		"flaky", "test -e /data/ran || { touch /data/ran; exit 1; }; "+upgradeSleeper,
		"steady", upgradeSleeper),
	"host.yaml": upgradePod("host", "  hostNetwork: true\n", "main", upgradeSleeper),
	// The one sandbox on the host network: it holds the pod's PID namespace.
	"pids.yaml": upgradePod("pids", "  hostNetwork: true\n  shareProcessNamespace: true\n",
		"main", upgradeSleeper, "side", upgradeSleeper),
}

// upgradePod is a pod of containers given as name, script pairs; every container mounts
// the volume named data if extra defines it.
func upgradePod(name, extra string, containers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 2\n%s  containers:\n", name, extra)
	for i := 0; i+1 < len(containers); i += 2 {
		fmt.Fprintf(&b, "  - name: %s\n    image: %s\n    command: [\"sh\", \"-c\", %q]\n", containers[i], e2eImage, containers[i+1])
		if strings.Contains(extra, "name: data") {
			b.WriteString("    volumeMounts: [{name: data, mountPath: /data}]\n")
		}
	}
	return b.String()
}

// Pods started by the previous release keep running across an upgrade: the new binary
// adopts them with the same processes and restart counts, restarts their containers
// into their old sandboxes, and removes them cleanly.
func TestUpgradeKeepsPods(t *testing.T) {
	old := buildRelease(t, previousRelease)
	n := newNode(t)
	sp := n.startRelease(old)
	sp.awaitLog("version=" + previousRelease)
	for file, manifest := range upgradePods {
		n.write(file, manifest)
	}
	n.awaitPods("the previous release's pods running, duo/flaky restarted once", func(pods map[string]corev1.Pod) bool {
		return allRunning(pods) && keptStatuses(pods)["duo-node1/flaky"].Restarts == 1
	})
	before := n.podProcesses()
	beforeStatus := keptStatuses(n.pods())
	checkReleaseLayout(t, before)

	sp.stop() // SIGTERM, without --stop-pods-on-exit: as a service manager stops it
	if code := sp.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the previous release exited with %d on SIGTERM, want 0", code)
	}
	if diff := cmp.Diff(live(before), live(n.podProcesses())); diff != "" {
		t.Fatalf("the previous release changed its pods' processes on its way out (-before +after):\n%s", diff)
	}

	upgraded := n.start()
	upgraded.awaitLog("staticpod started")
	n.awaitPods("the new binary to report every pod running", allRunning)
	// Relists wake every pod's worker and housekeeping looks for orphans and garbage:
	// after one of it and a few of them, the new binary had its chances to act.
	n.awaitHousekeeping()
	n.awaitRelists(5)
	after := n.podProcesses()
	if diff := cmp.Diff(beforeStatus, keptStatuses(n.pods())); diff != "" {
		t.Errorf("container statuses changed across the upgrade (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(live(before), live(after)); diff != "" {
		t.Errorf("running processes changed across the upgrade (-before +after):\n%s", diff)
	}
	if created := added(before, after); len(created) > 0 {
		t.Errorf("the new binary created containers for adopted pods: %v", created)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Containers of adopted pods restart into their pods' old sandboxes.
	killed := map[string]podProcess{}
	for _, key := range []string{"solo-node1/main", "duo-node1/steady"} {
		p := runningOne(t, after, key)
		if err := syscall.Kill(int(p.PID), syscall.SIGKILL); err != nil {
			t.Fatalf("kill %s (pid %d): %v", key, p.PID, err)
		}
		killed[key] = p
	}
	n.awaitPods("the killed containers restarted", func(pods map[string]corev1.Pod) bool {
		now := keptStatuses(pods)
		for key := range killed {
			if now[key].Restarts != beforeStatus[key].Restarts+1 {
				return false
			}
		}
		return allRunning(pods)
	})
	restarted := n.podProcesses()
	for key, gone := range killed {
		p := runningOne(t, restarted, key)
		sb := runningOne(t, restarted, strings.Split(key, "/")[0]+"/")
		for _, ns := range []string{"net", "ipc", "uts"} {
			if p.NS[ns] != sb.NS[ns] || p.NS[ns] != gone.NS[ns] {
				t.Errorf("%s restarted by the new binary is in %s namespace %s; its pod's sandbox (pid %d) and its previous run are in %s, %s",
					key, ns, p.NS[ns], sb.PID, sb.NS[ns], gone.NS[ns])
			}
		}
	}
	if created := added(after, restarted); len(created) != len(killed) {
		t.Errorf("containers created for the restarts of %d killed ones: %v", len(killed), created)
	}
	if diff := cmp.Diff(liveExcept(after, killed), liveExcept(restarted, killed)); diff != "" {
		t.Errorf("restarting the killed containers changed other processes (-before +after):\n%s", diff)
	}

	// Removed, the pods go whole: nothing of them is left in containerd or on the host.
	for file := range upgradePods {
		if err := os.Remove(filepath.Join(n.manifests, file)); err != nil {
			t.Fatal(err)
		}
	}
	n.awaitPods("every pod gone from the API", func(pods map[string]corev1.Pod) bool { return len(pods) == 0 })
	n.awaitNothingLeft(upgraded, before, restarted)
}

// buildRelease builds staticpod at commit of this clone's history, as that commit's
// Makefile does, into a directory that the test removes, and returns the binary. Without
// the commit (a shallow clone) the test skips, or fails in CI.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	if err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		msg := fmt.Sprintf("the previous release, commit %s, is not in the clone at %s (%v): a full clone, or `git fetch --unshallow`, has it", commit, root, err)
		if testenv.Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	tree, err := exec.Command("git", "-C", root, "archive", commit).Output()
	if err != nil {
		t.Fatalf("git archive %s: %v", commit, err)
	}
	extract := exec.Command("tar", "-x", "-C", src)
	extract.Stdin = bytes.NewReader(tree)
	if out, err := extract.CombinedOutput(); err != nil {
		t.Fatalf("extract %s: %v\n%s", commit, err, out)
	}
	bin := filepath.Join(dir, "staticpod")
	start := time.Now()
	// As the release's own `make build` does: through hack/build.sh where it has one,
	// else statically with go build alone.
	build := exec.Command("go", "build", "-ldflags", "-X main.version="+commit, "-o", bin, ".")
	script := filepath.Join(src, "hack", "build.sh")
	if _, err := os.Stat(script); err == nil {
		build = exec.Command(script, bin)
	}
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "VERSION="+commit)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build staticpod %s: %v\n%s", commit, err, out)
	}
	t.Logf("built staticpod %s in %v", commit, time.Since(start).Round(time.Millisecond))
	return bin
}

// startRelease runs bin, an older staticpod, as n.start runs the current one, with the
// flags as that release knows them; it is stopped (SIGTERM) when the test ends.
func (n *node) startRelease(bin string) *staticpod {
	n.t.Helper()
	return n.launch(bin, n.runArgs())
}

// podProcess is one sandbox or container of the node, as containerd and /proc show it.
type podProcess struct {
	ID      string // containerd's
	Key     string // "pod/container"; "pod/" for the pod's sandbox
	Attempt string
	Task    string // the task's status, "" without a task
	// PID and Started (the process's start, in clock ticks after boot) name one
	// process, where a PID alone may be reused; both are 0 unless the task runs.
	PID     uint32
	Started uint64
	NS      map[string]string // namespace links of a running process: "net" -> "net:[4026532000]"
}

// namespaceKinds are the namespaces a process's NS records.
var namespaceKinds = []string{"net", "ipc", "uts", "pid"}

// podProcesses lists every sandbox and container in the node's containerd namespace, by ID.
func (n *node) podProcesses() map[string]podProcess {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(n.t.Context(), n.ns), 10*time.Second)
	defer cancel()
	infos, err := n.d.Client.ContainerService().List(ctx)
	if err != nil {
		n.t.Fatalf("list containers: %v", err)
	}
	resp, err := n.d.Client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		n.t.Fatalf("list tasks: %v", err)
	}
	byID := map[string]*task.Process{}
	for _, p := range resp.Tasks {
		byID[p.ID] = p
	}
	out := map[string]podProcess{}
	for _, info := range infos {
		l := info.Labels
		p := podProcess{ID: info.ID, Key: l[releaseLabelPod] + "/" + l[releaseLabelContainer], Attempt: l[releaseLabelAttempt]}
		if l[releaseLabelKind] == "sandbox" {
			p.Key = l[releaseLabelPod] + "/"
		}
		if t := byID[info.ID]; t != nil {
			p.Task = strings.ToLower(t.Status.String())
			if t.Status == task.Status_RUNNING {
				p.PID = t.Pid
				p.Started, p.NS = inspectProcess(t.Pid)
			}
		}
		out[info.ID] = p
	}
	return out
}

// inspectProcess returns the start time and the namespaces of process pid; zero values
// for what it cannot read.
func inspectProcess(pid uint32) (uint64, map[string]string) {
	var started uint64
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// The fields after the command, which is in parentheses, start at the third;
		// starttime is the 22nd.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 19 {
				started, _ = strconv.ParseUint(f[19], 10, 64)
			}
		}
	}
	ns := map[string]string{}
	for _, kind := range namespaceKinds {
		ns[kind], _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
	}
	return started, ns
}

// live keeps the processes that run.
func live(ps map[string]podProcess) map[string]podProcess {
	out := map[string]podProcess{}
	for id, p := range ps {
		if p.PID != 0 {
			out[id] = p
		}
	}
	return out
}

// liveExcept keeps the processes that run, but for those of the containers keys names.
func liveExcept(ps map[string]podProcess, keys map[string]podProcess) map[string]podProcess {
	out := live(ps)
	for id, p := range out {
		if _, ok := keys[p.Key]; ok {
			delete(out, id)
		}
	}
	return out
}

// added lists the processes in after that before does not have.
func added(before, after map[string]podProcess) []string {
	var out []string
	for id, p := range after {
		if _, ok := before[id]; !ok {
			out = append(out, fmt.Sprintf("%s (%s, attempt %s, task %q)", id, p.Key, p.Attempt, p.Task))
		}
	}
	sort.Strings(out)
	return out
}

// runningOne returns the one running process with key, and fails t if there is not
// exactly one.
func runningOne(t *testing.T, ps map[string]podProcess, key string) podProcess {
	t.Helper()
	var found []podProcess
	for _, p := range live(ps) {
		if p.Key == key {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d running processes for %s, want 1: %+v", len(found), key, found)
	}
	return found[0]
}

// checkReleaseLayout checks that the previous release laid its pods out as this test
// assumes (a sandbox process per pod but the host-network one, containers in its
// namespaces), so that what survives the upgrade is that layout.
func checkReleaseLayout(t *testing.T, ps map[string]podProcess) {
	t.Helper()
	hostNet, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		pod     string
		shared  []string // namespaces the containers share with the sandbox; nil: no sandbox
		hostNet bool
	}{
		{"solo-node1", []string{"net", "ipc", "uts"}, false},
		{"duo-node1", []string{"net", "ipc", "uts"}, false},
		{"host-node1", nil, true},
		{"pids-node1", []string{"pid"}, true},
	} {
		var sandbox *podProcess
		var containers []podProcess
		for _, p := range live(ps) {
			switch {
			case p.Key == want.pod+"/":
				sandbox = &p
			case strings.HasPrefix(p.Key, want.pod+"/"):
				containers = append(containers, p)
			}
		}
		if (sandbox != nil) != (want.shared != nil) {
			t.Errorf("the previous release's %s: sandbox %+v; want one: %v", want.pod, sandbox, want.shared != nil)
			continue
		}
		for _, c := range containers {
			if got := c.NS["net"] == hostNet; got != want.hostNet {
				t.Errorf("the previous release's %s: in the host's network namespace: %v, want %v", c.Key, got, want.hostNet)
			}
			for _, ns := range want.shared {
				if c.NS[ns] != sandbox.NS[ns] {
					t.Errorf("the previous release's %s: %s namespace %s, its sandbox's %s", c.Key, ns, c.NS[ns], sandbox.NS[ns])
				}
			}
		}
	}
	if t.Failed() {
		t.Fatalf("the previous release's pods are not laid out as this test expects: %+v", live(ps))
	}
}

// keptStatus is what an upgrade must keep of a container's status.
type keptStatus struct {
	ID       string
	Restarts int32
}

// keptStatuses returns the API's container statuses of pods by "pod/container".
func keptStatuses(pods map[string]corev1.Pod) map[string]keptStatus {
	out := map[string]keptStatus{}
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			out[p.Name+"/"+cs.Name] = keptStatus{ID: cs.ContainerID, Restarts: cs.RestartCount}
		}
	}
	return out
}

// allRunning reports whether every pod of upgradePods is Running with all its
// containers running.
func allRunning(pods map[string]corev1.Pod) bool {
	for file := range upgradePods {
		p, ok := pods[strings.TrimSuffix(file, ".yaml")+"-"+e2eNode]
		if !ok || p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil {
				return false
			}
		}
	}
	return true
}

// awaitPods waits until cond holds for the pods the API reports, and returns them.
func (n *node) awaitPods(what string, cond func(map[string]corev1.Pod) bool) map[string]corev1.Pod {
	n.t.Helper()
	var pods map[string]corev1.Pod
	done := false
	defer func() { // runs as a failed Await ends the test: show the statuses instead
		if !done {
			for name, p := range pods {
				n.t.Logf("pod %s: %s %+v", name, p.Status.Phase, p.Status.ContainerStatuses)
			}
		}
	}()
	testenv.Await(n.t, what, time.Minute, func() bool {
		pods = n.pods()
		return cond(pods)
	})
	done = true
	return pods
}

// awaitNothingLeft waits until nothing of the node's pods is left: no container or
// task in containerd, none of the processes seen, no shim, log writer, pod directory or
// mount. daemon is the node's staticpod, the one process that stays.
func (n *node) awaitNothingLeft(daemon *staticpod, seen ...map[string]podProcess) {
	n.t.Helper()
	var left map[string]podProcess
	defer func() { // runs as a failed Await ends the test: show what was left
		if len(left) > 0 {
			n.t.Logf("left in containerd: %+v", left)
		}
	}()
	testenv.Await(n.t, "no container or task left in namespace "+n.ns, time.Minute, func() bool {
		left = n.podProcesses()
		return len(left) == 0
	})
	var alive []string
	defer func() { // runs as a failed Await ends the test: name the processes
		if len(alive) > 0 {
			n.t.Logf("processes still running: %v", alive)
		}
	}()
	testenv.Await(n.t, "every process of the pods to exit", 10*time.Second, func() bool {
		alive = nil
		for _, ps := range seen {
			for _, p := range live(ps) {
				if started, _ := inspectProcess(p.PID); started == p.Started {
					alive = append(alive, fmt.Sprintf("%s pid %d", p.Key, p.PID))
				}
			}
		}
		return len(alive) == 0
	})
	testenv.Await(n.t, "the shims of namespace "+n.ns+" to exit", 10*time.Second, func() bool {
		return len(shimsOf(n.ns)) == 0
	})
	var others []string
	defer func() { // runs as a failed Await ends the test: name the processes
		if len(others) > 0 {
			n.t.Logf("processes left: %v", others)
		}
	}()
	testenv.Await(n.t, "no process but the daemon naming "+n.dir, 10*time.Second, func() bool {
		others = processesNaming(n.dir, daemon.cmd.Process.Pid)
		return len(others) == 0
	})
	pods := n.path("root/pods")
	for _, dir := range []string{pods, n.path("root/run/pods")} {
		testenv.Await(n.t, "the pods' directories under "+dir+" removed", 10*time.Second, func() bool {
			entries, _ := os.ReadDir(dir)
			return len(entries) == 0
		})
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], pods+"/") {
			n.t.Errorf("a mount of a removed pod is left: %s", line)
		}
	}
}

// processesNaming returns the command lines of the processes, other than pid except,
// whose arguments name dir, as such or URL-escaped (the log writers the shims start get
// their log file's path in a URL query).
func processesNaming(dir string, except int) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, p := range procs {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		data, err := os.ReadFile(p)
		if err != nil || pid == except {
			continue
		}
		if args := string(data); strings.Contains(args, dir) || strings.Contains(args, url.QueryEscape(dir)) {
			out = append(out, fmt.Sprintf("%d: %s", pid, strings.ReplaceAll(args, "\x00", " ")))
		}
	}
	return out
}
