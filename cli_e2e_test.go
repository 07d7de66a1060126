package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	corev1 "k8s.io/api/core/v1"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/once"
	"github.com/staticpod/staticpod/runner"
)

// runSplit runs the binary with stdin and extra environment, and returns its stdout,
// stderr and exit code apart.
func runSplit(t *testing.T, stdin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	cmd.Env = append(os.Environ(), env...)
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("run staticpod %v: %v", args, err)
	}
	return out.String(), errOut.String(), 0
}

// twoContainers is a pod with an init container and two app containers.
const twoContainers = `apiVersion: v1
kind: Pod
metadata:
  name: two
  labels: {app: two}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - {name: setup, image: ` + e2eImage + `, command: ["sh", "-c", "echo set up"]}
  containers:
  - {name: a, image: ` + e2eImage + `, command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]}
  - {name: b, image: ` + e2eImage + `, command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]}
`

// TestCLIAgainstTheDaemon runs ps, logs, describe and exec against `staticpod run`.
func TestCLIAgainstTheDaemon(t *testing.T) {
	n := newNode(t)
	n.start()
	n.write("web.yaml", podManifest("web", "Always", "trap 'exit 0' TERM; echo hello from web; echo second line; while true; do sleep 0.1; done"))
	n.write("two.yaml", twoContainers)
	n.await("pods running", time.Minute, func(cs map[string]runner.Container) bool {
		return running("web-node1/main/0")(cs) && running("two-node1/a/0")(cs) && running("two-node1/b/0")(cs)
	})
	api := []string{"--api-socket", n.path("staticpod.sock")}
	awaitPS(t, api, "web-node1 ", "1/1", "Running")

	out, errOut, code := runSplit(t, "", nil, append([]string{"ps", "-o", "json"}, api...)...)
	var list corev1.PodList
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("ps -o json: exit %d (%s), decode: %v\n%s", code, errOut, err, out)
	}
	var web *corev1.Pod
	for i := range list.Items {
		if list.Items[i].Name == "web-node1" {
			web = &list.Items[i]
		}
	}
	if web == nil || web.Status.Phase != corev1.PodRunning || len(web.Status.ContainerStatuses) != 1 || !web.Status.ContainerStatuses[0].Ready ||
		web.Annotations["kubernetes.io/config.source"] != "file" || web.Spec.NodeName != e2eNode {
		t.Errorf("ps -o json: web-node1 = %+v", web)
	}
	out, _, _ = runSplit(t, "", nil, append([]string{"ps", "-o", "wide"}, api...)...)
	if !strings.Contains(out, "file:"+filepath.Join(n.manifests, "web.yaml")) || !strings.Contains(out, "two-node1 ") {
		t.Errorf("ps -o wide lacks the source or a pod:\n%s", out)
	}

	if out, errOut, code := runSplit(t, "", nil, append([]string{"logs", "web-node1"}, api...)...); code != 0 || out != "hello from web\nsecond line\n" {
		t.Errorf("logs web-node1: exit %d (%s), output %q", code, errOut, out)
	}
	if out, _, code := runSplit(t, "", nil, append([]string{"logs"}, append(api, "web-node1", "--tail", "1")...)...); code != 0 || out != "second line\n" {
		t.Errorf("logs web-node1 --tail 1: exit %d, output %q", code, out)
	}
	if out, _, code := runSplit(t, "", nil, append([]string{"logs"}, append(api, "two-node1", "-c", "setup")...)...); code != 0 || out != "set up\n" {
		t.Errorf("logs two-node1 -c setup: exit %d, output %q", code, out)
	}
	if _, errOut, code := runSplit(t, "", nil, append([]string{"logs", "two-node1"}, api...)...); code != spcli.ExitUsage || !strings.Contains(errOut, "its containers: a, b (init: setup)") {
		t.Errorf("logs two-node1 without -c: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runSplit(t, "", nil, append([]string{"describe", "web"}, api...)...); code != spcli.ExitInvalid || !strings.Contains(errOut, "did you mean web-node1?") {
		t.Errorf("describe web: exit %d, %q", code, errOut)
	}

	out, errOut, code = runSplit(t, "", nil, append([]string{"describe", "two-node1"}, api...)...)
	for _, want := range []string{`Name:\s+two-node1\n`, `Namespace:\s+default\n`, `Labels:\s+app=two\n`,
		`Source:\s+file:` + regexp.QuoteMeta(filepath.Join(n.manifests, "two.yaml")) + `\n`, `Init Containers:\n  setup:\n`,
		`State:\s+Terminated\n\s+Reason:\s+Completed\n`, `Containers:\n  a:\n`, `Ready:\s+True\n`, `Events:\n`,
		`Normal\s+Started\s+\S+\s+staticpod\s+Started container b\n`} {
		if code != 0 || !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("describe two-node1 (exit %d, %s) lacks %s:\n%s", code, errOut, want, out)
		}
	}

	ctr := []string{"--containerd-address", n.d.Address, "--containerd-namespace", n.ns, "--root-dir", n.path("root"), "--pod-log-dir", n.path("log/pods")}
	args := append(append(append([]string{"exec"}, api...), ctr...), "web-node1", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if out, errOut, code := runSplit(t, "", nil, args...); code != 7 || out != "out\n" || errOut != "err\n" {
		t.Errorf("exec: exit %d, stdout %q, stderr %q; want 7, out, err", code, out, errOut)
	}
	args = append(append(append([]string{"exec"}, api...), ctr...), "two-node1", "-c", "b", "-i", "--", "cat")
	if out, errOut, code := runSplit(t, "piped in\n", nil, args...); code != 0 || out != "piped in\n" {
		t.Errorf("exec -i cat: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	args = append(append(append([]string{"exec"}, api...), ctr...), "web-node1", "--", "no-such-command")
	if _, errOut, code := runSplit(t, "", nil, args...); code != spcli.ExitNotFound {
		t.Errorf("exec no-such-command: exit %d (%s), want 127", code, errOut)
	}
}

// awaitPS runs ps until a line holds every one of want, or fails after 30 s.
func awaitPS(t *testing.T, api []string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errOut, code := runSplit(t, "", nil, append([]string{"ps"}, api...)...)
		for _, line := range strings.Split(out, "\n") {
			if containsAll(line, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ps does not show %q after 30s: exit %d, %s\n%s", want, code, errOut, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// onceEnv runs `staticpod once` against the test containerd, with the test image in an
// image dir and a TMPDIR of its own, so that whatever it leaves on disk can be seen.
type onceEnv struct {
	t         *testing.T
	d         *testenv.Daemon
	manifests string
	images    string
	tmp       string
}

func newOnceEnv(t *testing.T) *onceEnv {
	t.Helper()
	o := &onceEnv{t: t, d: ctd.Daemon(t), manifests: t.TempDir(), images: t.TempDir(), tmp: t.TempDir()}
	if err := testenv.WriteImageArchive(filepath.Join(o.images, "busybox.tar"), testenv.ImageOptions{Ref: e2eImage}); err != nil {
		t.Fatal(err)
	}
	return o
}

func (o *onceEnv) write(name, content string) {
	o.t.Helper()
	if err := os.WriteFile(filepath.Join(o.manifests, name), []byte(content), 0o644); err != nil {
		o.t.Fatal(err)
	}
}

var onceNamespace = regexp.MustCompile(`namespace=(` + once.NamespacePrefix + `[0-9a-f]+)`)

// run runs once on the manifests and returns its stdout, stderr, exit code and the
// containerd namespace it used (from its debug log).
func (o *onceEnv) run(extra ...string) (stdout, stderr string, code int, ns string) {
	o.t.Helper()
	args := append([]string{"once", "--containerd-address", o.d.Address, "--image-dir", o.images, "--hostname-override", e2eNode,
		"--log-level", "debug", "--pleg-relist-period", e2eRelist.String()}, extra...)
	stdout, stderr, code = runSplit(o.t, "", []string{"TMPDIR=" + o.tmp}, append(args, o.manifests)...)
	if m := onceNamespace.FindStringSubmatch(stderr); m != nil {
		ns = m[1]
	}
	o.t.Cleanup(func() {
		if o.t.Failed() {
			o.t.Logf("once stdout:\n%s\nonce stderr:\n%s", stdout, stderr)
		}
	})
	return stdout, stderr, code, ns
}

// assertNothingLeft checks that once removed its namespace (containerd refuses that
// while it holds containers, images, content or snapshots), left no task, shim, runc
// state or cgroup behind, and nothing in its TMPDIR.
func (o *onceEnv) assertNothingLeft(ns string) {
	o.t.Helper()
	if ns == "" {
		o.t.Fatal("once did not log its containerd namespace")
	}
	ctx := o.d.Context(o.t, ns)
	all, err := o.d.Client.NamespaceService().List(ctx)
	if err != nil {
		o.t.Fatal(err)
	}
	if slices.Contains(all, ns) {
		o.t.Errorf("containerd namespace %s is left", ns)
	}
	if cs, err := o.d.Client.Containers(namespaces.WithNamespace(ctx, ns)); err != nil || len(cs) > 0 {
		o.t.Errorf("containers left in %s: %d (%v)", ns, len(cs), err)
	}
	// containerd asks a shim to shut down after its last task is deleted, and does not
	// wait for its exit: give it a moment.
	shims := shimsOf(ns)
	for deadline := time.Now().Add(10 * time.Second); len(shims) > 0 && time.Now().Before(deadline); shims = shimsOf(ns) {
		time.Sleep(50 * time.Millisecond)
	}
	if len(shims) > 0 {
		o.t.Errorf("shims of namespace %s still run: %v", ns, shims)
	}
	for _, p := range []string{filepath.Join(once.RuncStateDir, ns), filepath.Join(once.CgroupDir, ns)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			o.t.Errorf("%s is left (%v)", p, err)
		}
	}
	if left, _ := os.ReadDir(o.tmp); len(left) > 0 {
		o.t.Errorf("once left %d entries in its TMPDIR, first %s", len(left), left[0].Name())
	}
	if mounts, _ := os.ReadFile("/proc/self/mounts"); strings.Contains(string(mounts), o.tmp) {
		o.t.Errorf("mounts are left under %s", o.tmp)
	}
}

// shimsOf returns the command lines of the shims serving namespace ns.
func shimsOf(ns string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-namespace" && args[i+1] == ns {
				out = append(out, strings.Join(args, " "))
			}
		}
	}
	return out
}

func TestOnceExitsWithTheFailingCode(t *testing.T) {
	o := newOnceEnv(t)
	o.write("a-ok.yaml", podManifest("ok", "OnFailure", "echo fine"))
	o.write("b-job.yaml", podManifest("job", "Never", "echo the job ran; echo on stderr >&2; exit 3"))
	o.write("c-other.yaml", podManifest("other", "Never", "exit 4"))
	out, errOut, code, ns := o.run()
	if code != 3 {
		t.Fatalf("once: exit %d, want 3 (the first failing container's)", code)
	}
	for _, want := range []string{"ok-node1/main | fine\n", "job-node1/main | the job ran\n", "job-node1/main | on stderr\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("once's output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{`POD\s+CONTAINER\s+STATE\s+EXIT\s+RESTARTS`, `ok-node1\s+main\s+Completed\s+0\s+0`,
		`job-node1\s+main\s+Error\s+3\s+0`, `other-node1\s+main\s+Error\s+4\s+0`} {
		if !regexp.MustCompile(want).MatchString(errOut) {
			t.Errorf("once's summary lacks %s:\n%s", want, errOut)
		}
	}
	o.assertNothingLeft(ns)
}

func TestOnceRunsInitContainersFirstAndWaitsForReadiness(t *testing.T) {
	o := newOnceEnv(t)
	o.write("build.yaml", `apiVersion: v1
kind: Pod
metadata: {name: build}
spec:
  restartPolicy: Never
  volumes: [{name: work, emptyDir: {}}]
  initContainers:
  - name: fetch
    image: `+e2eImage+`
    command: ["sh", "-c", "echo fetching; sleep 1; echo fetched > /work/input; echo fetch done"]
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: main
    image: `+e2eImage+`
    command: ["sh", "-c", "echo building $(cat /work/input)"]
    volumeMounts: [{name: work, mountPath: /work}]
`)
	o.write("server.yaml", strings.Replace(podManifest("server", "Always",
		"trap 'exit 0' TERM; sleep 2; echo serving; touch /tmp/ready; while true; do sleep 0.1; done"),
		"    command:", "    readinessProbe: {exec: {command: [test, -e, /tmp/ready]}, periodSeconds: 1}\n    command:", 1))
	start := time.Now()
	out, errOut, code, ns := o.run("--timeout", "2m")
	if code != 0 {
		t.Fatalf("once: exit %d, want 0\n%s", code, errOut)
	}
	fetched, built := strings.Index(out, "build-node1/fetch | fetch done\n"), strings.Index(out, "build-node1/main | building fetched\n")
	if fetched < 0 || built < 0 || built < fetched {
		t.Errorf("the init container's output is not before the app's:\n%s", out)
	}
	if !strings.Contains(out, "server-node1/main | serving\n") || time.Since(start) < 2*time.Second {
		t.Errorf("once did not wait for the server to be ready (took %v):\n%s", time.Since(start), out)
	}
	if !regexp.MustCompile(`server-node1\s+main\s+Running\s+-\s+0`).MatchString(errOut) {
		t.Errorf("the summary lacks the running server:\n%s", errOut)
	}
	o.assertNothingLeft(ns)
}

func TestOnceTimeoutStopsAndLeavesNothing(t *testing.T) {
	o := newOnceEnv(t)
	o.write("sleeper.yaml", podManifest("sleeper", "Never", "echo sleeping; sleep 3600"))
	o.write("web.yaml", strings.Replace(podManifest("web", "Always", "sleep 3600", "  volumes: [{name: scratch, emptyDir: {medium: Memory}}]\n"),
		"    command:", "    volumeMounts: [{name: scratch, mountPath: /scratch}]\n    command:", 1))
	start := time.Now()
	out, errOut, code, ns := o.run("--timeout", "5s")
	took := time.Since(start)
	if code != once.ExitTimeout {
		t.Fatalf("once --timeout 5s: exit %d, want 124", code)
	}
	if took < 5*time.Second || took > 30*time.Second {
		t.Errorf("once --timeout 5s took %v", took)
	}
	if !strings.Contains(out, "sleeper-node1/main | sleeping\n") || !strings.Contains(errOut, "timed out after 5s") {
		t.Errorf("once --timeout: output %q, stderr:\n%s", out, errOut)
	}
	o.assertNothingLeft(ns)
}

func TestOnceRefusesInvalidManifests(t *testing.T) {
	o := newOnceEnv(t)
	o.write("good.yaml", podManifest("good", "Never", "true"))
	o.write("bad.yaml", strings.Replace(podManifest("bad", "Never", "true"), "image:", "imag:", 1))
	_, errOut, code, ns := o.run()
	want := "error: " + filepath.Join(o.manifests, "bad.yaml") + ": spec.containers[0].image: Required value"
	if code != spcli.ExitInvalid || !strings.Contains(errOut, want) || !strings.Contains(errOut, "nothing was run") || ns != "" {
		t.Errorf("once with an invalid manifest: exit %d, namespace %q, stderr:\n%s", code, ns, errOut)
	}
}

func TestOnceKeep(t *testing.T) {
	o := newOnceEnv(t)
	o.write("job.yaml", podManifest("job", "Never", "echo kept"))
	_, errOut, code, ns := o.run("--keep")
	if code != 0 || ns == "" || !strings.Contains(errOut, "kept (--keep): containerd namespace "+ns) {
		t.Fatalf("once --keep: exit %d, namespace %q:\n%s", code, ns, errOut)
	}
	t.Cleanup(func() {
		o.d.PurgeNamespace(context.Background(), ns)
		once.RemoveHostState(ns)
		unmountUnder(t, o.tmp) // the pod's /dev/shm, kept with the rest
	})
	cs, err := o.d.Client.Containers(namespaces.WithNamespace(o.d.Context(t, ns), ns))
	if err != nil || len(cs) == 0 {
		t.Errorf("once --keep left %d containers (%v), want the job's", len(cs), err)
	}
}

// TestOnceNeverDisturbsADaemon runs once on a daemon's own manifests, with the daemon's
// settings in the environment and its root dir given: once makes its own namespace and
// directories, and the daemon's pod, its container and its emptyDir are untouched.
func TestOnceNeverDisturbsADaemon(t *testing.T) {
	n := newNode(t)
	n.start()
	n.write("keeper.yaml", strings.Replace(podManifest("keeper", "Always",
		"echo kept > /data/file; trap 'exit 0' TERM; while true; do sleep 0.1; done", "  volumes: [{name: data, emptyDir: {}}]\n"),
		"    command:", "    volumeMounts: [{name: data, mountPath: /data}]\n    command:", 1))
	before := n.await("keeper running", time.Minute, running("keeper-node1/main/0"))["keeper-node1/main/0"]
	file := filepath.Join(n.path("root"), "pods", string(before.PodUID), "volumes", "data", "file")
	awaitFile(t, file, "kept")

	images := t.TempDir()
	if err := testenv.WriteImageArchive(filepath.Join(images, "busybox.tar"), testenv.ImageOptions{Ref: e2eImage}); err != nil {
		t.Fatal(err)
	}
	env := []string{"STATICPOD_CONTAINERD_NAMESPACE=" + n.ns, "STATICPOD_ROOT_DIR=" + n.path("root"), "STATICPOD_POD_LOG_DIR=" + n.path("log/pods")}
	out, errOut, code := runSplit(t, "", env, "once", "--containerd-address", n.d.Address, "--image-dir", images, "--hostname-override", e2eNode,
		"--root-dir", n.path("root"), "--pod-log-dir", n.path("log/pods"), "--timeout", "1m", n.manifests)
	if code != 0 || !strings.Contains(errOut, "keeper-node1   main        Running") {
		t.Fatalf("once on the daemon's manifests: exit %d\n%s\n%s", code, out, errOut)
	}
	after := n.containers()["keeper-node1/main/0"]
	if after.ID != before.ID || after.PID != before.PID || after.State != runner.StateRunning || len(n.containers()) != 1 {
		t.Errorf("once disturbed the daemon's pod: before %+v, after %v", before, summary(n.containers()))
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "kept\n" {
		t.Errorf("once removed the daemon's emptyDir: %q, %v", data, err)
	}
	if left, _ := filepath.Glob(filepath.Join(n.path("root"), once.NamespacePrefix+"*")); len(left) > 0 {
		t.Errorf("once left %v in the root dir it was given", left)
	}
}
