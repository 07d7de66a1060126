package containerdrt

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/logs"
)

const (
	logTestImage = "docker.io/library/busybox:log-test"
	// logCreatorEnv holds a logTaskSpec for runLogCreator, run as a process of
	// its own by TestShimLogOutlivesItsCreator.
	logCreatorEnv = "STATICPOD_TEST_LOG_CREATOR"
	logAwait      = 20 * time.Second // bound of every wait on a container or its log
)

func TestLogCreatorArgvSurvivesTheShim(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pods", "default_web_u1", "c", "0.log")
	link := filepath.Join(dir, "containers", "web_default_c-id.log")
	tio, err := logCreator("/usr/bin/staticpod", LogConfig{MaxSize: 4096, MaxFiles: 3}, path, link)("id")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("log file not prepared before the task: %v", err)
	}
	uri, err := url.Parse(tio.Config().Stdout)
	if err != nil || uri.Scheme != "binary" || uri.Path != "/usr/bin/staticpod" || tio.Config().Stderr != uri.String() {
		t.Fatalf("task IO = %+v, %v; want binary:///usr/bin/staticpod for both streams", tio.Config(), err)
	}
	var argv []string // as the shim's process.NewBinaryCmd builds it
	for k, vs := range uri.Query() {
		argv = append(argv, k)
		if len(vs) > 0 {
			argv = append(argv, vs[0])
		}
	}
	if len(argv) != 2 || argv[0] != logs.Command {
		t.Fatalf("logger argv = %q, want [%s CONFIG]", argv, logs.Command)
	}
	got, err := logs.ParseConfig(argv[1])
	want := logs.Config{Path: path, Symlink: link, MaxSize: 4096, MaxFiles: 3}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("logger config after the shim (-want +got):\n%s%v", diff, err)
	}
}

func TestLogCreatorRefusesUnwritableLog(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := logCreator("/usr/bin/staticpod", LogConfig{}, filepath.Join(file, "c", "0.log"), "")("id")
	if err == nil {
		t.Error("logCreator under a regular file succeeded, want the error before any task exists")
	}
}

func TestShimLoggerWritesStreamsAndSplitsLongLines(t *testing.T) {
	e := newLogEnv(t)
	spec := e.spec("streams", `echo to stdout; echo to stderr >&2; head -c 40000 /dev/zero | tr '\0' x; echo; printf 'no newline'`)
	task, exited := e.mustStart(t, spec)
	awaitExit(t, exited)
	if _, err := task.Delete(e.ctx); err != nil { // the shim ends the logger, which drains the pipes
		t.Fatalf("delete task: %v", err)
	}
	want := map[logs.Stream][]string{
		logs.Stdout: {"F to stdout", "P " + strings.Repeat("x", 16384), "P " + strings.Repeat("x", 16384), "F " + strings.Repeat("x", 40000-2*16384), "P no newline"},
		logs.Stderr: {"F to stderr"},
	}
	awaitRecords(t, spec.Path, want)

	if target, err := os.Readlink(spec.Symlink); err != nil || target != spec.Path {
		t.Errorf("Readlink(%s) = %q, %v; want %s", spec.Symlink, target, err, spec.Path)
	}
	var out strings.Builder
	if err := logs.Read(e.ctx, spec.Symlink, logs.ReadOptions{Tail: -1, Stream: logs.Stdout}, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "to stdout\n"+strings.Repeat("x", 40000)+"\nno newline"; got != want {
		t.Errorf("Read through the symlink = %.60q... (%d bytes), want %d bytes", got, len(got), len(want))
	}
}

func TestShimLoggerRotates(t *testing.T) {
	const maxFiles = 3
	e := newLogEnv(t)
	spec := e.spec("rotate", `i=0; while :; do echo "line $i ................................"; i=$((i+1)); usleep 20000; done`)
	spec.MaxSize, spec.MaxFiles = 1024, maxFiles
	task, exited := e.mustStart(t, spec)

	base := filepath.Base(spec.Path)
	seen := map[string]bool{} // rotated files ever seen
	// More rotations than files kept: the oldest were deleted as new ones came.
	testenv.Await(t, fmt.Sprintf("%d rotated files", maxFiles+1), logAwait, func() bool {
		files := logFiles(t, filepath.Dir(spec.Path))
		if len(files) > maxFiles {
			t.Fatalf("log files = %v, want at most %d", files, maxFiles)
		}
		for _, f := range files {
			seen[f] = seen[f] || f != base
		}
		delete(seen, base)
		return len(seen) > maxFiles
	})
	stopLoggedTask(t, e.ctx, task, exited)

	files := logFiles(t, filepath.Dir(spec.Path))
	t.Logf("rotated files seen: %d; kept: %v", len(seen), files)
	if len(files) != maxFiles {
		t.Fatalf("log files after the container stopped = %v, want %d", files, maxFiles)
	}
	assertContiguousLines(t, filepath.Dir(spec.Path), files)
}

func TestShimLogOutlivesItsCreator(t *testing.T) {
	e := newLogEnv(t)
	spec := e.spec("outlives", `i=0; while :; do echo "tick $i"; i=$((i+1)); usleep 50000; done`)
	creator := startCreator(t, spec)
	if err := creator.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("creator process %d started the task and was killed: %v", creator.Process.Pid, creator.Wait())

	size := fileSize(t, spec.Path)
	for range 3 { // it keeps growing, tick after tick, with nobody of staticpod alive
		size = awaitGrowth(t, spec.Path, size)
	}
	c, err := e.d.Client.LoadContainer(e.ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := task.Status(e.ctx); err != nil || st.Status != client.Running {
		t.Fatalf("task status after its creator died = %+v, %v; want running", st, err)
	}
	exited, err := task.Wait(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	stopLoggedTask(t, e.ctx, task, exited)
	if err := c.Delete(e.ctx, client.WithSnapshotCleanup); err != nil {
		t.Errorf("delete container: %v", err)
	}
	if pids := loggerPIDs(t, spec.Path); len(pids) > 0 {
		t.Errorf("logger processes %v still running after the task was deleted", pids)
	}
}

// runLogCreator is the helper process of TestShimLogOutlivesItsCreator: TestMain runs it
// instead of the tests when logCreatorEnv is set. It creates and starts a logged task,
// prints "started", and waits to be killed.
func runLogCreator(raw string) error {
	var spec logTaskSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return err
	}
	c, err := client.New(spec.Address)
	if err != nil {
		return err
	}
	ctx := namespaces.WithNamespace(context.Background(), spec.Namespace)
	task, _, err := startLoggedTask(ctx, c, spec)
	if err != nil {
		return err
	}
	fmt.Printf("started %d\n", task.Pid())
	io.Copy(io.Discard, os.Stdin) // until killed, or until the test that started it ends
	return nil
}

// logEnv is a containerd namespace with the busybox image and the staticpod binary, and
// a directory for pod logs and their symlinks.
type logEnv struct {
	d     *testenv.Daemon
	ns    string
	ctx   context.Context
	bin   string
	dir   string
	image client.Image
}

func newLogEnv(t *testing.T) *logEnv {
	t.Helper()
	dir := t.TempDir() // first: removed after the namespace's purge has ended the loggers
	d := ctd.Daemon(t)
	bin := mustLoggerBinary(t)
	ns := d.Namespace(t)
	image := d.MustImportImage(t, ns, testenv.ImageOptions{Ref: logTestImage})
	return &logEnv{d: d, ns: ns, ctx: d.Context(t, ns), bin: bin, dir: dir, image: image}
}

// mustLoggerBinary returns the staticpod binary, which runs as the logger.
func mustLoggerBinary(t *testing.T) string {
	t.Helper()
	return testBinary(t)
}

// logTaskSpec is a container whose output goes to the staticpod logger, complete enough
// for another process to create it.
type logTaskSpec struct {
	Address, Namespace, Image, Binary string
	ID, Script, Path, Symlink         string
	MaxSize                           int64
	MaxFiles                          int
}

// spec returns a logged container running script, with the kubelet's log layout under
// the environment's directory.
func (e *logEnv) spec(name, script string) logTaskSpec {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-node1", Namespace: "default", UID: types.UID("uid-" + name)}}
	id := name + "-c-0"
	return logTaskSpec{
		Address: e.d.Address, Namespace: e.ns, Image: logTestImage, Binary: e.bin,
		ID: id, Script: script,
		Path:    logFilePath(filepath.Join(e.dir, "pods"), pod, "c", 0),
		Symlink: logs.SymlinkPath(filepath.Join(e.dir, "containers"), pod.Name, pod.Namespace, "c", id),
	}
}

func (e *logEnv) mustStart(t *testing.T, spec logTaskSpec) (client.Task, <-chan client.ExitStatus) {
	t.Helper()
	task, exited, err := startLoggedTask(e.ctx, e.d.Client, spec)
	if err != nil {
		t.Fatal(err)
	}
	return task, exited
}

// startLoggedTask creates spec's container and starts its task with the shim's logger.
func startLoggedTask(ctx context.Context, c *client.Client, spec logTaskSpec) (client.Task, <-chan client.ExitStatus, error) {
	image, err := c.GetImage(ctx, spec.Image)
	if err != nil {
		return nil, nil, fmt.Errorf("get image %s: %w", spec.Image, err)
	}
	ctr, err := c.NewContainer(ctx, spec.ID, client.WithNewSnapshot(spec.ID, image),
		client.WithNewSpec(oci.WithImageConfig(image), oci.WithProcessArgs("sh", "-c", spec.Script)))
	if err != nil {
		return nil, nil, fmt.Errorf("create container %s: %w", spec.ID, err)
	}
	cfg := LogConfig{MaxSize: spec.MaxSize, MaxFiles: spec.MaxFiles}
	task, err := ctr.NewTask(ctx, logCreator(spec.Binary, cfg, spec.Path, spec.Symlink))
	if err != nil {
		return nil, nil, fmt.Errorf("create task %s: %w", spec.ID, err)
	}
	exited, err := task.Wait(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("wait task %s: %w", spec.ID, err)
	}
	if err := task.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("start task %s: %w", spec.ID, err)
	}
	return task, exited, nil
}

// stopLoggedTask kills the task and deletes it, which ends its logger.
func stopLoggedTask(t *testing.T, ctx context.Context, task client.Task, exited <-chan client.ExitStatus) {
	t.Helper()
	if err := task.Kill(ctx, syscall.SIGKILL); err != nil {
		t.Fatalf("kill task: %v", err)
	}
	awaitExit(t, exited)
	if _, err := task.Delete(ctx); err != nil {
		t.Fatalf("delete task: %v", err)
	}
}

func awaitExit(t *testing.T, exited <-chan client.ExitStatus) {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(logAwait):
		t.Fatalf("task did not exit within %v", logAwait)
	}
}

// awaitRecords polls until the log at path holds exactly want: per stream, each record's
// tag and content.
func awaitRecords(t *testing.T, path string, want map[logs.Stream][]string) {
	t.Helper()
	summarize := func(m map[logs.Stream][]string) map[logs.Stream][]string {
		out := map[logs.Stream][]string{}
		for s, recs := range m {
			for _, r := range recs {
				out[s] = append(out[s], fmt.Sprintf("%.20s... (%d bytes)", r, len(r)))
			}
		}
		return out
	}
	var diff string
	defer func() { // runs as a failed Await ends the test: show how the records differ
		if diff != "" {
			t.Logf("records of %s (-want +got):\n%s", path, diff)
		}
	}()
	testenv.Await(t, "the records of "+path, logAwait, func() bool {
		diff = cmp.Diff(summarize(want), summarize(recordsByStream(t, path)))
		return diff == ""
	})
}

// recordsByStream returns the tag and content of each record of the file, by stream,
// and checks their timestamps.
func recordsByStream(t *testing.T, path string) map[logs.Stream][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[logs.Stream][]string{}
	for _, rec := range strings.SplitAfter(string(data), "\n") {
		fields := strings.SplitN(strings.TrimSuffix(rec, "\n"), " ", 4)
		if len(fields) < 4 {
			continue // the last, empty piece
		}
		if _, err := time.Parse(time.RFC3339Nano, fields[0]); err != nil {
			t.Errorf("record %.80q: %v", rec, err)
		}
		got[logs.Stream(fields[1])] = append(got[logs.Stream(fields[1])], fields[2]+" "+fields[3])
	}
	return got
}

// logFiles returns the names of the log files in dir: the current one and the rotated.
func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}

// assertContiguousLines checks that the files, oldest first and the current one last,
// hold "line N" records with no N missing: what rotation kept is the newest output.
func assertContiguousLines(t *testing.T, dir string, files []string) {
	t.Helper()
	current, rotated := files[0], files[1:] // "0.log" sorts before "0.log.<time>"
	next := -1
	for _, f := range append(rotated, current) {
		for _, rec := range recordsByStream(t, filepath.Join(dir, f))[logs.Stdout] {
			var n int
			if _, err := fmt.Sscanf(rec, "F line %d", &n); err != nil {
				t.Fatalf("%s: record %q: %v", f, rec, err)
			}
			if next >= 0 && n != next {
				t.Fatalf("%s: line %d follows line %d", f, n, next-1)
			}
			next = n + 1
		}
	}
}

// startCreator runs runLogCreator as a process of its own and returns once it has
// started spec's task.
func startCreator(t *testing.T, spec logTaskSpec) *exec.Cmd {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), logCreatorEnv+"="+string(raw))
	stdin, err := cmd.StdinPipe() // kept open: the helper waits for its end
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close() })
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	started := make(chan string, 1)
	go func() { // ends when the helper does
		var out strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(&out, sc.Text())
			if strings.HasPrefix(sc.Text(), "started ") {
				started <- ""
			}
		}
		started <- out.String()
	}()
	select {
	case out := <-started:
		if out != "" {
			t.Fatalf("creator process ended before starting the task:\n%s", out)
		}
	case <-time.After(logAwait):
		t.Fatalf("creator process did not start the task within %v", logAwait)
	}
	return cmd
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// awaitGrowth polls until the file at path is larger than size, and returns its size.
func awaitGrowth(t *testing.T, path string, size int64) int64 {
	t.Helper()
	var now int64
	testenv.Await(t, fmt.Sprintf("%s to grow beyond %d bytes", path, size), logAwait, func() bool {
		now = fileSize(t, path)
		return now > size
	})
	return now
}

// loggerPIDs returns the processes running `staticpod logger` for the log at path.
func loggerPIDs(t *testing.T, path string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		args := strings.Split(string(raw), "\x00")
		if err == nil && len(args) > 2 && args[1] == logs.Command && strings.Contains(args[2], url.QueryEscape(path)) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}
