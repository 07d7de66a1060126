package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// socketClient talks HTTP to staticpod's unix socket.
func socketClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

// apiGet fetches path from the node's daemon and returns status and body. It retries
// while the daemon does not answer: it may still be starting.
func (n *node) apiGet(path string) (int, []byte) {
	n.t.Helper()
	var resp *http.Response
	var err error
	defer func() { // runs as a failed Await ends the test: say why
		if err != nil {
			n.t.Logf("GET %s: %v", path, err)
		}
	}()
	testenv.Await(n.t, "the API to answer GET "+path, 30*time.Second, func() bool {
		resp, err = socketClient(n.path("staticpod.sock")).Get("http://staticpod" + path)
		return err == nil
	})
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// relists returns how many relists the daemon has done, from GET /metrics.
func (n *node) relists() uint64 {
	n.t.Helper()
	code, body := n.apiGet("/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if code != http.StatusOK || err != nil {
		n.t.Fatalf("GET /metrics = %d, parse: %v", code, err)
	}
	f := families["staticpod_pleg_relist_duration_seconds"]
	if f == nil || len(f.GetMetric()) != 1 {
		n.t.Fatalf("/metrics lacks staticpod_pleg_relist_duration_seconds: %v", f)
	}
	return f.GetMetric()[0].GetHistogram().GetSampleCount()
}

// awaitRelists waits until the daemon has relisted count more times. Each relist wakes
// every pod's worker, so a test that checks that something does not happen waits for a
// few: they prove that the daemon had its chances to do it, where a fixed sleep proves
// nothing on a slow machine.
func (n *node) awaitRelists(count uint64) {
	n.t.Helper()
	from := n.relists()
	testenv.Await(n.t, fmt.Sprintf("%d relists of the daemon", count), time.Minute, func() bool {
		return n.relists() >= from+count
	})
}

// pods returns GET /pods decoded with k8s.io/api.
func (n *node) pods() map[string]corev1.Pod {
	n.t.Helper()
	code, body := n.apiGet("/pods")
	var list corev1.PodList
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil || list.Kind != "PodList" {
		n.t.Fatalf("GET /pods = %d %s", code, body)
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// awaitPhase waits until the named pod reports phase through the API.
func (n *node) awaitPhase(name string, phase corev1.PodPhase) corev1.Pod {
	n.t.Helper()
	var p corev1.Pod
	defer func() { // runs as a failed Await ends the test: show the status instead
		if p.Status.Phase != phase {
			n.t.Logf("pod %s: %v", name, p.Status)
		}
	}()
	testenv.Await(n.t, fmt.Sprintf("pod %s %s", name, phase), time.Minute, func() bool {
		p = n.pods()[name]
		return p.Status.Phase == phase
	})
	return p
}

func TestAPIServesPodsLogsMetricsAndPushes(t *testing.T) {
	n := newNode(t)
	sp := n.start()
	n.write("job.yaml", podManifest("job", "Never", "echo one; echo two; echo three; exit 3"))
	n.write("ok.yaml", podManifest("ok", "OnFailure", "echo fine"))
	job := n.awaitPhase("job-node1", corev1.PodFailed)
	if st := job.Status.ContainerStatuses[0].State.Terminated; st == nil || st.ExitCode != 3 || st.Reason != "Error" {
		t.Errorf("job's container state = %+v, want terminated with exit code 3", job.Status.ContainerStatuses[0].State)
	}
	n.awaitPhase("ok-node1", corev1.PodSucceeded)

	code, body := n.apiGet("/containerLogs/default/job-node1/main?tailLines=2")
	if code != http.StatusOK || string(body) != "two\nthree\n" {
		t.Errorf("logs tail 2 = %d %q, want the last two lines", code, body)
	}
	code, body = n.apiGet("/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if code != http.StatusOK || err != nil {
		t.Fatalf("/metrics = %d, parse: %v", code, err)
	}
	if f := families["staticpod_pods"]; f == nil || gaugeFor(f.GetMetric(), "phase", "Failed") != 1 {
		t.Errorf("staticpod_pods{phase=Failed} missing or wrong: %v", f)
	}
	if families["staticpod_pleg_relist_duration_seconds"] == nil || families["staticpod_pod_start_duration_seconds"] == nil {
		t.Error("/metrics lacks the runner's relist and pod start metrics")
	}

	// Push a manifest, restart staticpod, and it is still there; DELETE removes it.
	put := func(name, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, "http://staticpod/manifests/"+name, strings.NewReader(body))
		resp, err := socketClient(n.path("staticpod.sock")).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := put("pushed", podManifest("pushed", "Always", "sleep 3600")); code != http.StatusOK {
		t.Fatalf("PUT = %d %s", code, body)
	}
	n.await("the pushed pod", time.Minute, running("pushed-node1/main/0"))
	if code, body := put("broken", strings.Replace(podManifest("broken", "Always", "sleep 1"), "image:", "imagen:", 1)); code != http.StatusUnprocessableEntity || !strings.Contains(body, "spec.containers[0].image") {
		t.Errorf("PUT of an invalid manifest = %d %s, want 422 naming the field", code, body)
	}
	before := n.containers()["pushed-node1/main/0"]
	sp.stop()
	n.start()
	n.awaitPhase("pushed-node1", corev1.PodRunning)
	if after := n.containers()["pushed-node1/main/0"]; after.PID != before.PID {
		t.Errorf("the pushed pod was restarted across a restart of staticpod (pid %d -> %d)", before.PID, after.PID)
	}
	req, _ := http.NewRequest(http.MethodDelete, "http://staticpod/manifests/pushed", nil)
	if resp, err := socketClient(n.path("staticpod.sock")).Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE = %v %v", resp, err)
	}
	n.await("the pushed pod gone", time.Minute, func(cs map[string]runner.Container) bool {
		_, ok := cs["pushed-node1/main/0"]
		return !ok
	})
	info, err := os.Stat(n.path("staticpod.sock"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("API socket mode = %v (%v), want 0600", info.Mode(), err)
	}
}

func gaugeFor(ms []*dto.Metric, label, value string) float64 {
	for _, m := range ms {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func TestAPIOverTCPNeedsTheToken(t *testing.T) {
	n := newNode(t)
	token := n.path("token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	sp := n.start("--listen", addr, "--api-token-file", token)
	sp.awaitLog("staticpod started")
	get := func(auth string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/pods", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		var code int
		testenv.Await(t, "the API to answer on "+addr, 10*time.Second, func() bool {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			code = resp.StatusCode
			return true
		})
		return code
	}
	if code := get(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code := get("Bearer wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	if code := get("Bearer s3cret"); code != http.StatusOK {
		t.Errorf("right token: %d, want 200", code)
	}
}

// manifestServer serves a body that the test changes, counts requests and 304s, and
// records the headers it got.
type manifestServer struct {
	mu      sync.Mutex // guards body and header
	body    string
	header  http.Header
	garbage atomic.Bool
	polls   atomic.Int32
	unmod   atomic.Int32
}

func (m *manifestServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.polls.Add(1)
	m.mu.Lock()
	body := m.body
	m.header = r.Header.Clone()
	m.mu.Unlock()
	if m.garbage.Load() {
		fmt.Fprint(w, "{{{ not yaml")
		return
	}
	etag := fmt.Sprintf("\"%x\"", sha256.Sum256([]byte(body)))
	if r.Header.Get("If-None-Match") == etag {
		m.unmod.Add(1)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", etag)
	fmt.Fprint(w, body)
}

func (m *manifestServer) set(body string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.body = body
}

func TestManifestURLDrivesPods(t *testing.T) {
	n := newNode(t)
	ms := &manifestServer{body: podManifest("fleet", "Always", "sleep 3600")}
	srv := httptest.NewServer(ms)
	defer srv.Close()
	sp := n.start("--manifest-url", srv.URL, "--manifest-url-header", "X-Fleet:blue", "--http-check-frequency", "200ms")
	first := n.await("the URL's pod", time.Minute, running("fleet-node1/main/0"))["fleet-node1/main/0"]
	ms.mu.Lock()
	if got := ms.header.Get("X-Fleet"); got != "blue" {
		t.Errorf("header X-Fleet = %q, want blue", got)
	}
	ms.mu.Unlock()
	testenv.Await(t, "an unchanged body answered 304", 30*time.Second, func() bool { return ms.unmod.Load() > 0 })

	// Garbage for a few polls, and relists after them, each a chance for the runner to
	// act on the failing source: the pod keeps running.
	ms.garbage.Store(true)
	from := ms.polls.Load()
	testenv.Await(t, "polls answered with garbage", 30*time.Second, func() bool { return ms.polls.Load() >= from+3 })
	n.awaitRelists(3)
	srv.CloseClientConnections()
	ms.garbage.Store(false)
	if now := n.containers()["fleet-node1/main/0"]; now.PID != first.PID || now.State != runner.StateRunning {
		t.Fatalf("a failing URL disturbed its pod: %+v", now)
	}
	sp.awaitLog("manifest URL")

	ms.set(podManifest("fleet", "Always", "sleep 7200")) // changed
	n.await("the changed pod", time.Minute, func(cs map[string]runner.Container) bool {
		c := cs["fleet-node1/main/0"]
		return c.ID != first.ID && c.State == runner.StateRunning
	})
	ms.set("") // removed
	n.await("the pod removed", time.Minute, func(cs map[string]runner.Container) bool { return len(cs) == 0 })
}

func TestFileSourceWorksWhileTheURLNeverAnswers(t *testing.T) {
	n := newNode(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	n.write("web.yaml", podManifest("web", "Always", "sleep 3600"))
	sp := n.start("--manifest-url", "http://"+lis.Addr().String()+"/pods", "--http-check-frequency", "1s")
	n.await("web running", time.Minute, running("web-node1/main/0"))
	sp.stop()
	// After a restart, with the URL still silent, the file source alone is ready, and a
	// file pod deleted meanwhile is an orphan of that source: it is stopped.
	if err := os.Remove(filepath.Join(n.manifests, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	n.start("--manifest-url", "http://"+lis.Addr().String()+"/pods", "--http-check-frequency", "1s")
	n.await("web stopped", time.Minute, func(cs map[string]runner.Container) bool {
		_, ok := cs["web-node1/main/0"]
		return !ok
	})
}

func TestPreviousLogsAfterACrash(t *testing.T) {
	n := newNode(t)
	n.start()
	n.write("crash.yaml", podManifest("crash", "Always", "echo started at $(cat /proc/uptime); sleep 3600"))
	first := n.await("running", time.Minute, running("crash-node1/main/0"))["crash-node1/main/0"]
	awaitFile(t, first.LogPath, "started at")
	if err := syscall.Kill(int(first.PID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second := n.await("restarted", time.Minute, running("crash-node1/main/1"))["crash-node1/main/1"]
	awaitFile(t, second.LogPath, "started at")
	n.awaitHousekeeping() // the last exit must survive it
	code, body := n.apiGet("/containerLogs/default/crash-node1/main?previous=1")
	if code != http.StatusOK || !strings.HasPrefix(string(body), "started at ") || strings.Count(string(body), "\n") != 1 {
		t.Errorf("previous logs = %d %q, want the first attempt's output", code, body)
	}
	pod := n.pods()["crash-node1"]
	if last := pod.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 137 {
		t.Errorf("lastState = %+v, want the SIGKILL exit", pod.Status.ContainerStatuses[0].LastTerminationState)
	}
}
