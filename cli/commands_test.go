package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/staticpod/staticpod/api"
	"github.com/staticpod/staticpod/api/apitest"
	"github.com/staticpod/staticpod/api/client"
	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/events"
)

// fixturePods are what the fake daemon runs: a pod from a file with two containers, a
// crashing one in kube-system from a URL, and a pushed one.
func fixturePods() []corev1.Pod {
	web := statusPod(corev1.PodRunning, []corev1.ContainerStatus{csRunning(true), csRunning(true)})
	web.Status.ContainerStatuses[1].Name, web.Spec.Containers[1].Name = "sidecar", "sidecar"
	web.Annotations = map[string]string{manifests.AnnotationSource: "file", manifests.AnnotationLocation: "/etc/kubernetes/manifests/web.yaml"}
	web.Spec.NodeName = "node1"
	web.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}}
	etcd := statusPod(corev1.PodRunning, []corev1.ContainerStatus{csWaiting("etcd", runner.ReasonCrashLoopBackOff)})
	etcd.Name, etcd.Namespace, etcd.Spec.NodeName = "etcd-node1", "kube-system", "node1"
	etcd.Annotations = map[string]string{manifests.AnnotationSource: "http", manifests.AnnotationLocation: "http://cfg/etcd.yaml"}
	job := statusPod(corev1.PodSucceeded, []corev1.ContainerStatus{csExited("main", "Completed", 0)})
	job.Name = "job-node1"
	job.Annotations = map[string]string{manifests.AnnotationSource: "api", manifests.AnnotationLocation: "job"}
	for _, p := range []*corev1.Pod{web, etcd, job} {
		p.Status.StartTime = &metav1.Time{Time: time.Now().Add(-5 * time.Hour)}
	}
	return []corev1.Pod{*web, *etcd, *job}
}

// runCLI runs the commands in this process and returns what they printed and the exit
// code. It is not safe for parallel tests: urfave/cli exits through package variables.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{Name: "staticpod", OnUsageError: UsageError, Commands: []*cli.Command{PS(), Logs(), Describe(), Exec(), Wait(), Top()}}
	for _, c := range app.Commands {
		c.OnUsageError = UsageError
	}
	app.Writer, app.ErrWriter = &out, &errOut
	exiter, errWriter := cli.OsExiter, cli.ErrWriter
	defer func() { cli.OsExiter, cli.ErrWriter = exiter, errWriter }()
	cli.OsExiter, cli.ErrWriter = func(c int) { code = c }, &errOut
	if err := app.Run(append([]string{"staticpod"}, args...)); err != nil && code == 0 {
		code = 1
		fmt.Fprintln(&errOut, err)
	}
	return out.String(), errOut.String(), code
}

func TestPSAgainstAFakeDaemon(t *testing.T) {
	d := apitest.NewServer(t, fixturePods())
	out, errOut, code := runCLI(t, "ps", "--api-socket", d.Socket)
	want := `NAME                     READY   STATUS             RESTARTS   AGE
web-node1                2/2     Running            0          5h
kube-system/etcd-node1   0/1     CrashLoopBackOff   0          5h
job-node1                0/1     Completed          0          5h
`
	if code != 0 || out != want {
		t.Errorf("ps: exit %d, stderr %q, output:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	out, _, _ = runCLI(t, "ps", "-o", "wide", "--api-socket", d.Socket)
	for _, line := range []string{
		"NAME                     READY   STATUS             RESTARTS   AGE   IP         NODE     SOURCE",
		"web-node1                2/2     Running            0          5h    10.0.0.1   node1    file:/etc/kubernetes/manifests/web.yaml",
		"kube-system/etcd-node1   0/1     CrashLoopBackOff   0          5h    <none>     node1    url:http://cfg/etcd.yaml",
		"job-node1                0/1     Completed          0          5h    <none>     <none>   api:job",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("ps -o wide lacks %q:\n%s", line, out)
		}
	}
}

func TestPSPrintsThePodList(t *testing.T) {
	d := apitest.NewServer(t, fixturePods())
	for _, format := range []string{"json", "yaml"} {
		out, errOut, code := runCLI(t, "ps", "-o", format, "--api-socket", d.Socket)
		var list corev1.PodList
		if err := yaml.Unmarshal([]byte(out), &list); code != 0 || err != nil {
			t.Fatalf("ps -o %s: exit %d (%s), decode: %v\n%s", format, code, errOut, err, out)
		}
		if list.Kind != "PodList" || len(list.Items) != 3 || list.Items[1].Status.ContainerStatuses[0].State.Waiting.Reason != "CrashLoopBackOff" {
			t.Errorf("ps -o %s decodes to %+v", format, list)
		}
	}
	if out, _, _ := runCLI(t, "ps", "-o", "json", "--api-socket", d.Socket); !strings.HasPrefix(out, "{\n    \"kind\": \"PodList\",\n    \"apiVersion\": \"v1\"") {
		t.Errorf("ps -o json is not indented as kubectl's:\n%.80s", out)
	}
	if _, errOut, code := runCLI(t, "ps", "-o", "xml", "--api-socket", d.Socket); code != ExitUsage || !strings.Contains(errOut, "use wide, json or yaml") {
		t.Errorf("ps -o xml: exit %d, %q; want 2", code, errOut)
	}
}

func TestClientErrorsSayWhatToDo(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone.sock")
	_, errOut, code := runCLI(t, "ps", "--api-socket", missing)
	if code != ExitUsage || !strings.Contains(errOut, "not running: no API socket at "+missing) || !strings.Contains(errOut, "staticpod run") || !strings.Contains(errOut, "systemctl") ||
		!strings.Contains(errOut, "or give its socket with --api-socket (or STATICPOD_API_SOCKET)") {
		t.Errorf("ps without a daemon: exit %d, %q", code, errOut)
	}

	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "missing bearer token", http.StatusUnauthorized)
	}))
	defer denied.Close()
	if _, errOut, code := runCLI(t, "ps", "--server", denied.URL); code != ExitInvalid || !strings.Contains(errOut, "ps: missing bearer token (give the API token with --token-file) (HTTP 401)") {
		t.Errorf("ps --server without a token: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "ps", "--server", "127.0.0.1:8080"); code != ExitUsage || !strings.Contains(errOut, `--server 127.0.0.1:8080: use http://host:port or https://host:port`) {
		t.Errorf("ps --server without a scheme: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "ps", "--server", denied.URL, "--token-file", missing); code != ExitUsage || !strings.Contains(errOut, "--token-file: open "+missing) {
		t.Errorf("ps --token-file of a missing file: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "ps", "--server", "http://127.0.0.1:1"); code != ExitUsage || !strings.Contains(errOut, "does not answer at http://127.0.0.1:1") {
		t.Errorf("ps --server with nothing there: exit %d, %q", code, errOut)
	}
}

func TestPodNotFoundSuggestsNearNames(t *testing.T) {
	d := apitest.NewServer(t, fixturePods())
	for _, tc := range []struct{ args, want string }{
		{"logs web", `pod "default/web" not found; did you mean web-node1?`},
		{"describe web-nod1", `pod "default/web-nod1" not found; did you mean web-node1?`},
		{"describe etcd-node1", `did you mean kube-system/etcd-node1?`},
		{"exec jb-node1 -- true", `did you mean one of job-node1, web-node1?`},
		{"logs zzz", `pod "default/zzz" not found (see staticpod ps)`},
	} {
		args := strings.Fields(tc.args)
		_, errOut, code := runCLI(t, append([]string{args[0], "--api-socket", d.Socket}, args[1:]...)...)
		if code != ExitInvalid || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, %q; want 1 and %q", tc.args, code, errOut, tc.want)
		}
	}
	empty := apitest.NewServer(t, nil)
	if _, errOut, _ := runCLI(t, "describe", "web", "--api-socket", empty.Socket); !strings.Contains(errOut, "staticpod runs no pods") {
		t.Errorf("describe with no pods: %q", errOut)
	}
}

func TestLogsChoosesTheContainer(t *testing.T) {
	d := apitest.NewServer(t, fixturePods())
	_, errOut, code := runCLI(t, "logs", "web-node1", "--api-socket", d.Socket)
	if code != ExitUsage || !strings.Contains(errOut, "pod web-node1 has 2 containers: choose one with -c; its containers: main, sidecar") {
		t.Errorf("logs of a two-container pod without -c: exit %d, %q", code, errOut)
	}
	_, errOut, code = runCLI(t, "logs", "web-node1", "-c", "nope", "--api-socket", d.Socket)
	if code != ExitUsage || !strings.Contains(errOut, `pod web-node1 has no container "nope"; its containers: main, sidecar`) {
		t.Errorf("logs -c nope: exit %d, %q", code, errOut)
	}
	out, errOut, code := runCLI(t, "logs", "--api-socket", d.Socket, "web-node1", "-c", "sidecar", "-f", "--tail", "5", "--timestamps", "-p")
	if code != 0 || out != apitest.Log {
		t.Fatalf("logs: exit %d, %q, output %q", code, errOut, out)
	}
	if got, want := d.LastRequest(), "/containerLogs/default/web-node1/sidecar?follow=1&previous=1&tailLines=5&timestamps=1"; got != want {
		t.Errorf("logs asked %s, want %s", got, want)
	}
	if _, _, code := runCLI(t, "logs", "kube-system/etcd-node1", "--api-socket", d.Socket); code != 0 || d.LastRequest() != "/containerLogs/kube-system/etcd-node1/etcd" {
		t.Errorf("logs of a one-container pod: exit %d, asked %s", code, d.LastRequest())
	}
}

func TestPSWatchPrintsChanges(t *testing.T) {
	d := apitest.NewServer(t, fixturePods())
	api := client.New(d.Socket)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	list, err := api.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- watchPods(ctx, api, w, list, false)
		w.Close()
	}()
	out := bufio.NewScanner(r)
	var lines []string
	for len(lines) < 4 && out.Scan() { // the header and the first list
		lines = append(lines, out.Text())
	}
	fixed := fixturePods()
	fixed[1].Status.ContainerStatuses[0] = csRunning(true)
	d.SetPods(fixed[:2])
	for out.Scan() { // until the deleted pod, or the deadline
		lines = append(lines, out.Text())
		if strings.Contains(out.Text(), "Deleted") {
			break
		}
	}
	cancel()
	go io.Copy(io.Discard, r) // lets a last write end
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{
		"NAME                     READY   STATUS             RESTARTS   AGE",
		"web-node1                2/2     Running            0          5h",
		"kube-system/etcd-node1   0/1     CrashLoopBackOff   0          5h",
		"job-node1                0/1     Completed          0          5h",
		"kube-system/etcd-node1   1/1     Running            0          5h",
		"job-node1                0/1     Deleted            0          5h",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("ps -w (-want +got):\n%s", diff)
	}
}

func TestDescribeAgainstAFakeDaemon(t *testing.T) {
	etcd := etcdPod()
	d := apitest.NewServer(t, []corev1.Pod{*etcd})
	d.SetEvents([]events.Record{{UID: etcd.UID, Pod: "kube-system/etcd-node1", Type: "Normal", Reason: "Started", Message: "Started container etcd",
		First: time.Now().Add(-time.Minute), Last: time.Now().Add(-time.Minute), Count: 1}})
	out, errOut, code := runCLI(t, "describe", "--api-socket", d.Socket, "kube-system/etcd-node1")
	if code != 0 || !strings.Contains(out, "Name:         etcd-node1\n") || !strings.Contains(out, "  Normal  Started  60s   staticpod  Started container etcd\n") {
		t.Errorf("describe: exit %d, %q:\n%s", code, errOut, out)
	}
	if got := d.LastRequest(); got != "/events?pod=kube-system%2Fetcd-node1" {
		t.Errorf("describe asked %s for the events", got)
	}
}

// A pod whose image is being pulled shows the pull's bytes: in ps -o wide's STATUS
// (ps without -o keeps kubectl's ContainerCreating), and under the container's state in
// describe, as kubectl describe shows a waiting message.
func TestPullProgressInPSWideAndDescribe(t *testing.T) {
	msg := wire.PullProgress{Done: 12_300_000, Total: 45_600_000}.Message("registry.local/app:2")
	app := statusPod(corev1.PodPending, []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: runner.ReasonContainerCreating, Message: msg}}}})
	app.Name, app.Spec.NodeName = "app-node1", "node1"
	app.Annotations = map[string]string{manifests.AnnotationSource: "file", manifests.AnnotationLocation: "/etc/kubernetes/manifests/app.yaml"}
	app.Status.StartTime = &metav1.Time{Time: time.Now().Add(-time.Minute)}
	starting := statusPod(corev1.PodPending, []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: runner.ReasonContainerCreating, Message: wire.PullProgress{}.Message("app:3")}}}})
	starting.Name, starting.Spec.NodeName = "starting-node1", "node1"
	starting.Annotations = map[string]string{manifests.AnnotationSource: "file", manifests.AnnotationLocation: "/etc/kubernetes/manifests/starting.yaml"}
	starting.Status.StartTime = &metav1.Time{Time: time.Now().Add(-time.Minute)}
	d := apitest.NewServer(t, []corev1.Pod{*app, *starting})

	out, _, code := runCLI(t, "ps", "-o", "wide", "--api-socket", d.Socket)
	for _, line := range []string{
		"NAME             READY   STATUS                  RESTARTS   AGE   IP       NODE    SOURCE",
		"app-node1        0/1     Pulling 12.3MB/45.6MB   0          60s   <none>   node1   file:/etc/kubernetes/manifests/app.yaml",
		"starting-node1   0/1     Pulling                 0          60s   <none>   node1   file:/etc/kubernetes/manifests/starting.yaml",
	} {
		if code != 0 || !strings.Contains(out, line+"\n") {
			t.Errorf("ps -o wide: exit %d, lacks %q:\n%s", code, line, out)
		}
	}
	if out, _, _ := runCLI(t, "ps", "--api-socket", d.Socket); !strings.Contains(out, "app-node1        0/1     ContainerCreating   0          60s\n") {
		t.Errorf("ps without -o wide shows more than kubectl's reason:\n%s", out)
	}
	out, errOut, code := runCLI(t, "describe", "--api-socket", d.Socket, "app-node1")
	want := "    State:          Waiting\n      Reason:       ContainerCreating\n      Message:      Pulling image \"registry.local/app:2\": 12.3 MB of 45.6 MB\n"
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("describe: exit %d, %q; lacks\n%s\nin:\n%s", code, errOut, want, out)
	}
}

// execDaemon is a real API server over a fake runner whose only running container,
// main of web-node1, runs fakeCommand.
type execDaemon struct{ pods []*corev1.Pod }

func (d execDaemon) Pods() []*corev1.Pod            { return d.pods }
func (d execDaemon) Events() *events.Store          { return events.New(time.Now) }
func (d execDaemon) Healthy() (bool, time.Time)     { return true, time.Now() }
func (d execDaemon) SourceReady(source string) bool { return true }
func (d execDaemon) Settled() bool                  { return true }
func (d execDaemon) Exec(_ context.Context, id string, req runner.ExecRequest) (int, error) {
	switch {
	case id != "web-main":
		return -1, fmt.Errorf("exec in %s: not found", id)
	case req.Command[0] == "sh":
		fmt.Fprintln(req.Stdout, "out")
		fmt.Fprintln(req.Stderr, "err")
		return 7, nil
	}
	return -1, fmt.Errorf("exec failed: unable to start container process: exec: %q: executable file not found in $PATH", req.Command[0])
}

// serveExec runs an API server with exec over the fixture pods until the test ends and
// returns its socket.
func serveExec(t *testing.T) string {
	t.Helper()
	var pods []*corev1.Pod
	for _, p := range fixturePods() {
		if p.Name == "web-node1" {
			p.Status.ContainerStatuses[0].ContainerID = "containerd://web-main"
		}
		pods = append(pods, &p)
	}
	d := execDaemon{pods: pods}
	socket := filepath.Join(t.TempDir(), "api.sock")
	s, err := api.New(api.Config{Backend: d, Exec: d, Socket: socket})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil { // before the commands dial; Run serves on it
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return socket
}

func TestExecExitsAsTheCommandDid(t *testing.T) {
	socket := serveExec(t)
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"the command's exit code and streams", []string{"web-node1", "-c", "main", "--", "sh", "-c", "echo out; echo err >&2; exit 7"}, 7, "out\n", "err\n"},
		{"a command not found", []string{"web-node1", "-c", "main", "--", "nope"}, ExitNotFound, "", `exec: exec failed: unable to start container process: exec: "nope": executable file not found in $PATH` + "\n"},
		{"a container that does not run", []string{"kube-system/etcd-node1", "--", "sh"}, ExitInvalid, "",
			"exec: container etcd of pod kube-system/etcd-node1 is not running (Waiting: CrashLoopBackOff) (HTTP 409)\n"},
		{"a pod without --container", []string{"web-node1", "--", "sh"}, ExitUsage, "", ""},
		{"no --", []string{"web-node1", "sh"}, ExitUsage, "", ""},
	}
	for _, tt := range tests {
		// Flags of the time exec reached containerd itself are still accepted.
		args := append([]string{"exec", "--api-socket", socket, "--containerd-address", "/nowhere", "--root-dir", "/nowhere"}, tt.args...)
		out, errOut, code := runCLI(t, args...)
		if code != tt.code || out != tt.stdout || tt.stderr != "" && errOut != tt.stderr {
			t.Errorf("exec %s: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.name, code, out, errOut, tt.code, tt.stdout, tt.stderr)
		}
	}
}
