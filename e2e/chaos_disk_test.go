package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/events"
)

// chattyScript counts lines on stdout and notes the count in /shared/beat, where the
// test sees that it goes on whatever happens to its log.
const chattyScript = "trap 'exit 0' TERM; i=0; while true; do i=$((i+1)); echo \"line $i\"; echo $i > /shared/beat; sleep 0.01; done"

// mountTmpfs mounts a tmpfs of size bytes at dir, made if missing; the node's cleanup
// unmounts it.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatal(err)
	}
}

// fill writes a file at path until its filesystem has no space left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			return
		}
	}
}

// beat reads the count a chatty container noted last.
func beat(shared string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(readFile(filepath.Join(shared, "beat"))))
	return n
}

// awaitBeats waits until the chatty container has counted count more lines: it runs,
// and writing its output never blocks it.
func awaitBeats(t *testing.T, shared string, count int) {
	t.Helper()
	from := beat(shared)
	testenv.Await(t, fmt.Sprintf("the container to count %d more lines from %d", count, from), 20*time.Second, func() bool {
		return beat(shared) >= from+count
	})
}

// awaitEvent waits until the daemon's events hold one of reason whose message mentions
// about.
func (n *node) awaitEvent(reason, about string) events.Record {
	n.t.Helper()
	var found events.Record
	testenv.Await(n.t, fmt.Sprintf("a %s event about %s", reason, about), 30*time.Second, func() bool {
		code, body := n.apiGet("/events")
		var recs []events.Record
		if code != http.StatusOK || json.Unmarshal(body, &recs) != nil {
			return false
		}
		for _, r := range recs {
			if r.Reason == reason && strings.Contains(r.Message, about) {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

// metricLine waits until GET /metrics has the line want.
func (n *node) awaitMetric(want string) {
	n.t.Helper()
	testenv.Await(n.t, "/metrics to say "+want, 30*time.Second, func() bool {
		_, body := n.apiGet("/metrics")
		return strings.Contains(string(body), want+"\n")
	})
}

// removeAndAwaitGone removes the manifest file and waits until its pods are gone: a
// container that writes into the node's directory must be gone before the test ends
// and the directory is removed (the containers of the test's namespace are purged only
// after).
func (n *node) removeAndAwaitGone(file string) {
	n.t.Helper()
	os.Remove(filepath.Join(n.manifests, file))
	n.await("the pods gone", time.Minute, func(cs map[string]runner.Container) bool { return len(cs) == 0 })
}

// The log directory's filesystem full: the container runs on, never blocked by its
// output (its log writer drops what it cannot write), staticpod reports it (an event,
// metrics), and once there is space again the container's new lines are logged again.
func TestChaosLogFilesystemFull(t *testing.T) {
	n := newNode(t)
	mountTmpfs(t, n.path("log"), 4<<20)
	shared, volume, mount := sharedDir(t, n)
	n.start()
	n.write("chatty.yaml", mount(podManifest("chatty", "Always", chattyScript, volume)))
	c := n.await("the pod running", time.Minute, running("chatty-node1/main/0"))["chatty-node1/main/0"]
	awaitFile(t, c.LogPath, "line 1\n")

	filler := n.path("log/filler")
	fill(t, filler)
	n.awaitEvent("FilesystemFull", n.path("log/pods"))
	n.awaitMetric(`staticpod_filesystem_fault{dir="log",fault="full"} 1`)
	awaitBeats(t, shared, 300) // about 3 s of output, none of it written
	if cs := n.containers(); cs["chatty-node1/main/0"].State != runner.StateRunning || len(cs) != 1 {
		t.Fatalf("containers while the log filesystem is full: %v, want the first attempt running", summary(cs))
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := beat(shared)
	n.awaitEvent("FilesystemRecovered", n.path("log/pods"))
	n.awaitMetric(`staticpod_filesystem_fault{dir="log",fault="full"} 0`)
	awaitBeats(t, shared, 100)
	// A line counted after the space came back is in the log: logging resumed.
	testenv.Await(t, "a line counted after the space came back in the log", 20*time.Second, func() bool {
		data := readFile(c.LogPath)
		i := strings.LastIndex(data, " line ")
		if i < 0 {
			return false
		}
		last, _ := strconv.Atoi(strings.Fields(data[i+len(" line "):])[0])
		return last > freed
	})
	if cs := n.containers(); cs["chatty-node1/main/0"].State != runner.StateRunning || len(cs) != 1 {
		t.Errorf("containers after the space came back: %v, want the first attempt running", summary(cs))
	}
	n.removeAndAwaitGone("chatty.yaml")
}

// putManifest pushes a manifest through the API and returns the status and body.
func (n *node) putManifest(name, body string) (int, string) {
	n.t.Helper()
	n.apiGet("/readyz") // the daemon may still be starting
	req, _ := http.NewRequest(http.MethodPut, "http://staticpod/manifests/"+name, strings.NewReader(body))
	resp, err := socketClient(n.path("staticpod.sock")).Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The root dir's filesystem full, then read-only: the pods run on untouched, staticpod
// reports the fault (events, metrics, a refused push), a staticpod started on the
// read-only root adopts them, and nothing kept there is corrupted: after the fault and a
// restart, the pushed manifest is whole and a finished pod is still remembered (it does
// not run again).
func TestChaosRootFilesystemFullOrReadOnly(t *testing.T) {
	n := newNode(t)
	root := n.path("root")
	mountTmpfs(t, root, 64<<20)
	sp := n.start()
	loop := "trap 'exit 0' TERM; while true; do sleep 0.1; done"
	n.write("web.yaml", podManifest("web", "Always", loop))
	n.write("done.yaml", podManifest("done", "Never", "exit 0", "  hostNetwork: true\n"))
	pushed := podManifest("pushed", "Always", loop, "  hostNetwork: true\n")
	if code, body := n.putManifest("pushed", pushed); code != http.StatusOK {
		t.Fatalf("PUT = %d %s", code, body)
	}
	healthy := func(cs map[string]runner.Container) bool {
		return running("web-node1/main/0")(cs) && running("pushed-node1/main/0")(cs) && exited("done-node1/main/0")(cs)
	}
	before := n.await("the pods running, the job done", time.Minute, healthy)
	n.awaitPhase("done-node1", "Succeeded")
	stillRunning := func(when string) {
		t.Helper()
		cs := n.containers()
		for _, key := range []string{"web-node1/main/0", "pushed-node1/main/0"} {
			if cs[key].State != runner.StateRunning || cs[key].ID != before[key].ID || cs[key].PID != before[key].PID {
				t.Errorf("%s: %s is %s (pid %d), want the same container running (pid %d)", when, key, cs[key].State, cs[key].PID, before[key].PID)
			}
		}
		if _, ok := cs["done-node1/main/1"]; ok {
			t.Errorf("%s: the finished job ran again", when)
		}
	}

	filler := filepath.Join(root, "filler")
	fill(t, filler)
	n.awaitEvent("FilesystemFull", root)
	n.awaitMetric(`staticpod_filesystem_fault{dir="root",fault="full"} 1`)
	if code, body := n.putManifest("extra", podManifest("extra", "Always", loop)); code < 500 {
		t.Errorf("PUT on a full root dir = %d %s, want a server error", code, body)
	}
	n.awaitRelists(5)
	stillRunning("root dir full")
	os.Remove(filler)
	n.awaitEvent("FilesystemRecovered", root)

	if err := syscall.Mount("", root, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	n.awaitEvent("FilesystemReadOnly", root)
	n.awaitMetric(`staticpod_filesystem_fault{dir="root",fault="read-only"} 1`)
	if code, body := n.putManifest("extra", podManifest("extra", "Always", loop)); code < 500 {
		t.Errorf("PUT on a read-only root dir = %d %s, want a server error", code, body)
	}
	n.awaitRelists(5)
	stillRunning("root dir read-only")
	// A staticpod that starts on the read-only root dir adopts the pods and says why
	// it cannot do more.
	sp.stop()
	sp = n.start()
	n.awaitEvent("FilesystemReadOnly", root)
	n.awaitRelists(5)
	stillRunning("restarted on a read-only root dir")
	sp.stop()
	if err := syscall.Mount("", root, "", syscall.MS_REMOUNT, ""); err != nil {
		t.Fatal(err)
	}

	n.start()
	n.await("the pods as they were after the restart", time.Minute, healthy)
	n.awaitRelists(5)
	stillRunning("after the restart")
	if got := readFile(filepath.Join(root, "manifests", "pushed.yaml")); got != pushed {
		t.Errorf("the pushed manifest after the faults:\n%s\nwant:\n%s", got, pushed)
	}
	if _, ok := n.pods()["extra-node1"]; ok {
		t.Errorf("a push refused during the faults runs after them")
	}
	n.awaitPhase("done-node1", "Succeeded")
}
