package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/once"
	"github.com/staticpod/staticpod/runner"
)

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
	// containerd asks a shim to shut down after its last task is deleted, and does not
	// wait for its exit: give it a moment.
	var shims []string
	defer func() { // runs as a failed Await ends the test: name the shims
		if len(shims) > 0 {
			o.t.Logf("shims still running: %v", shims)
		}
	}()
	testenv.Await(o.t, "the shims of namespace "+ns+" to exit", 10*time.Second, func() bool {
		shims = shimsOf(ns)
		return len(shims) == 0
	})
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

// TestOnceReadsObjects: once serves the ConfigMaps and Secrets of the manifests given to
// their pods, as the daemon does, and removes their tmpfs with everything else.
func TestOnceReadsObjects(t *testing.T) {
	o := newOnceEnv(t)
	o.write("config.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: job}\ndata: {greeting: hello}\n---\n"+
		"apiVersion: v1\nkind: Secret\nmetadata: {name: job}\nstringData: {token: s3cret}\n")
	o.write("job.yaml", strings.Replace(podManifest("job", "Never", "echo $GREETING $(cat /token/token) $(grep -c ' /token tmpfs ' /proc/mounts)",
		"  volumes: [{name: token, secret: {secretName: job}}]\n"),
		"    command:", "    env: [{name: GREETING, valueFrom: {configMapKeyRef: {name: job, key: greeting}}}]\n"+
			"    volumeMounts: [{name: token, mountPath: /token}]\n    command:", 1))
	out, _, code, ns := o.run()
	if code != 0 || !strings.Contains(out, "job-node1/main | hello s3cret 1\n") {
		t.Fatalf("once: exit %d, output %q; want the ConfigMap's key, the Secret's file, on a tmpfs", code, out)
	}
	o.assertNothingLeft(ns)
}

// TestOnceStartsContainerdAtAUnixURL: once --start-containerd takes containerd's socket
// as the kubelet's --container-runtime-endpoint spells it, starts its containerd there,
// runs the pod and stops that containerd.
func TestOnceStartsContainerdAtAUnixURL(t *testing.T) {
	o := newOnceEnv(t)
	o.write("job.yaml", podManifest("job", "Never", "echo ran"))
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	out, errOut, code, _ := o.run("--start-containerd", "--containerd-address", "unix://"+sock)
	if code != 0 || !strings.Contains(out, "job-node1/main | ran\n") {
		t.Fatalf("once --start-containerd at unix://%s: exit %d, stdout:\n%s\nstderr:\n%s", sock, code, out, errOut)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the containerd once started still serves at %s (%v)", sock, err)
	}
}
