package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

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

type fakeDaemon struct {
	sock   string
	pods   []corev1.Pod
	events []runner.Record
	logs   string

	mu       sync.Mutex // guards requests, and pods once served
	requests []string
}

func (d *fakeDaemon) setPods(pods []corev1.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pods = pods
}

func (d *fakeDaemon) servedPods() []corev1.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pods
}

func newFakeDaemon(t *testing.T, pods []corev1.Pod) *fakeDaemon {
	t.Helper()
	d := &fakeDaemon{sock: filepath.Join(t.TempDir(), "api.sock"), pods: pods, logs: "line 1\nline 2\n"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
		d.note(r)
		serveJSON(w, http.StatusOK, corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: d.servedPods()})
	})
	mux.HandleFunc("GET /pods/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		d.note(r)
		for _, p := range d.servedPods() {
			if p.Namespace == r.PathValue("namespace") && p.Name == r.PathValue("name") {
				serveJSON(w, http.StatusOK, p)
				return
			}
		}
		serveJSON(w, http.StatusNotFound, metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound, Message: fmt.Sprintf("pods %q not found", r.PathValue("name"))})
	})
	mux.HandleFunc("GET /containerLogs/{namespace}/{name}/{container}", func(w http.ResponseWriter, r *http.Request) {
		d.note(r)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, d.logs)
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		d.note(r)
		serveJSON(w, http.StatusOK, d.events)
	})
	l, err := net.Listen("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return d
}

func (d *fakeDaemon) note(r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.requests = append(d.requests, r.URL.RequestURI())
}

func (d *fakeDaemon) lastRequest() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests[len(d.requests)-1]
}

func serveJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp()
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
	d := newFakeDaemon(t, fixturePods())
	out, errOut, code := runCLI(t, "ps", "--api-socket", d.sock)
	want := `NAME                     READY   STATUS             RESTARTS   AGE
web-node1                2/2     Running            0          5h
kube-system/etcd-node1   0/1     CrashLoopBackOff   0          5h
job-node1                0/1     Completed          0          5h
`
	if code != 0 || out != want {
		t.Errorf("ps: exit %d, stderr %q, output:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	out, _, _ = runCLI(t, "ps", "-o", "wide", "--api-socket", d.sock)
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
	d := newFakeDaemon(t, fixturePods())
	for _, format := range []string{"json", "yaml"} {
		out, errOut, code := runCLI(t, "ps", "-o", format, "--api-socket", d.sock)
		var list corev1.PodList
		if err := yaml.Unmarshal([]byte(out), &list); code != 0 || err != nil {
			t.Fatalf("ps -o %s: exit %d (%s), decode: %v\n%s", format, code, errOut, err, out)
		}
		if list.Kind != "PodList" || len(list.Items) != 3 || list.Items[1].Status.ContainerStatuses[0].State.Waiting.Reason != "CrashLoopBackOff" {
			t.Errorf("ps -o %s decodes to %+v", format, list)
		}
	}
	if out, _, _ := runCLI(t, "ps", "-o", "json", "--api-socket", d.sock); !strings.HasPrefix(out, "{\n    \"kind\": \"PodList\",\n    \"apiVersion\": \"v1\"") {
		t.Errorf("ps -o json is not indented as kubectl's:\n%.80s", out)
	}
	if _, errOut, code := runCLI(t, "ps", "-o", "xml", "--api-socket", d.sock); code != exitUsage || !strings.Contains(errOut, "use wide, json or yaml") {
		t.Errorf("ps -o xml: exit %d, %q; want 2", code, errOut)
	}
}

func TestClientErrorsSayWhatToDo(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone.sock")
	_, errOut, code := runCLI(t, "ps", "--api-socket", missing)
	if code != exitUsage || !strings.Contains(errOut, "not running: no API socket at "+missing) || !strings.Contains(errOut, "staticpod run") || !strings.Contains(errOut, "systemctl") {
		t.Errorf("ps without a daemon: exit %d, %q", code, errOut)
	}

	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, errOut, code := runCLI(t, "logs", "web-node1", "--api-socket", stale); code != exitUsage || !strings.Contains(errOut, "nothing listens on the unix socket "+stale) {
		t.Errorf("logs on a stale socket: exit %d, %q", code, errOut)
	}

	// Root opens any socket, so the refusal is made up as the dialer reports it.
	denied := &url.Error{Op: "Get", URL: "http://staticpod/pods", Err: &net.OpError{Op: "dial", Net: "unix",
		Err: os.NewSyscallError("connect", syscall.EACCES)}}
	if got := unixClient("/run/staticpod/staticpod.sock").dialError(denied).Error(); !strings.Contains(got, "permission denied on the unix socket /run/staticpod/staticpod.sock") || !strings.Contains(got, "root") {
		t.Errorf("permission denied says %q", got)
	}

	if _, errOut, code := runCLI(t, "ps", "--server", "http://127.0.0.1:1"); code != exitUsage || !strings.Contains(errOut, "does not answer at http://127.0.0.1:1") {
		t.Errorf("ps --server with nothing there: exit %d, %q", code, errOut)
	}
}

func TestPodNotFoundSuggestsNearNames(t *testing.T) {
	d := newFakeDaemon(t, fixturePods())
	for _, tc := range []struct{ args, want string }{
		{"logs web", `pod "default/web" not found; did you mean web-node1?`},
		{"describe web-nod1", `pod "default/web-nod1" not found; did you mean web-node1?`},
		{"describe etcd-node1", `did you mean kube-system/etcd-node1?`},
		{"exec jb-node1 -- true", `did you mean one of job-node1, web-node1?`},
		{"logs zzz", `pod "default/zzz" not found (see staticpod ps)`},
	} {
		args := strings.Fields(tc.args)
		_, errOut, code := runCLI(t, append([]string{args[0], "--api-socket", d.sock}, args[1:]...)...)
		if code != exitInvalid || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, %q; want 1 and %q", tc.args, code, errOut, tc.want)
		}
	}
	empty := newFakeDaemon(t, nil)
	if _, errOut, _ := runCLI(t, "describe", "web", "--api-socket", empty.sock); !strings.Contains(errOut, "staticpod runs no pods") {
		t.Errorf("describe with no pods: %q", errOut)
	}
}

func TestLogsChoosesTheContainer(t *testing.T) {
	d := newFakeDaemon(t, fixturePods())
	_, errOut, code := runCLI(t, "logs", "web-node1", "--api-socket", d.sock)
	if code != exitUsage || !strings.Contains(errOut, "pod web-node1 has 2 containers: choose one with -c; its containers: main, sidecar") {
		t.Errorf("logs of a two-container pod without -c: exit %d, %q", code, errOut)
	}
	_, errOut, code = runCLI(t, "logs", "web-node1", "-c", "nope", "--api-socket", d.sock)
	if code != exitUsage || !strings.Contains(errOut, `pod web-node1 has no container "nope"; its containers: main, sidecar`) {
		t.Errorf("logs -c nope: exit %d, %q", code, errOut)
	}
	out, errOut, code := runCLI(t, "logs", "--api-socket", d.sock, "web-node1", "-c", "sidecar", "-f", "--tail", "5", "--timestamps", "-p")
	if code != 0 || out != d.logs {
		t.Fatalf("logs: exit %d, %q, output %q", code, errOut, out)
	}
	if got, want := d.lastRequest(), "/containerLogs/default/web-node1/sidecar?follow=1&previous=1&tailLines=5&timestamps=1"; got != want {
		t.Errorf("logs asked %s, want %s", got, want)
	}
	if _, _, code := runCLI(t, "logs", "kube-system/etcd-node1", "--api-socket", d.sock); code != 0 || d.lastRequest() != "/containerLogs/kube-system/etcd-node1/etcd" {
		t.Errorf("logs of a one-container pod: exit %d, asked %s", code, d.lastRequest())
	}
}

func TestPSWatchPrintsChanges(t *testing.T) {
	d := newFakeDaemon(t, fixturePods())
	client := unixClient(d.sock)
	ctx, cancel := context.WithCancel(t.Context())
	list, err := client.pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	done := make(chan error)
	go func() { done <- watchPods(ctx, client, &out, list, false) }()
	fixed := fixturePods()
	fixed[1].Status.ContainerStatuses[0] = csRunning(true)
	d.setPods(fixed[:2])
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "Deleted") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
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
	d := newFakeDaemon(t, []corev1.Pod{*etcd})
	d.events = []runner.Record{{UID: etcd.UID, Pod: "kube-system/etcd-node1", Type: "Normal", Reason: "Started", Message: "Started container etcd",
		First: time.Now().Add(-time.Minute), Last: time.Now().Add(-time.Minute), Count: 1}}
	out, errOut, code := runCLI(t, "describe", "--api-socket", d.sock, "kube-system/etcd-node1")
	if code != 0 || !strings.Contains(out, "Name:         etcd-node1\n") || !strings.Contains(out, "  Normal  Started  60s   staticpod  Started container etcd\n") {
		t.Errorf("describe: exit %d, %q:\n%s", code, errOut, out)
	}
	if got := d.lastRequest(); got != "/events?pod=kube-system%2Fetcd-node1" {
		t.Errorf("describe asked %s for the events", got)
	}
}

func TestExecNeedsARunningContainer(t *testing.T) {
	d := newFakeDaemon(t, fixturePods())
	_, errOut, code := runCLI(t, "exec", "--api-socket", d.sock, "kube-system/etcd-node1", "--", "sh")
	if code != exitInvalid || !strings.Contains(errOut, "container etcd of pod kube-system/etcd-node1 is not running (Waiting: CrashLoopBackOff)") {
		t.Errorf("exec in a crashing container: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "exec", "--api-socket", d.sock, "web-node1", "sh"); code != exitUsage || !strings.Contains(errOut, "after --") {
		t.Errorf("exec without --: exit %d, %q", code, errOut)
	}
}
