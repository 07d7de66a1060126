package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/events"
)

// TestEditPullsBeforeStoppingTheOldPod edits a running pod to an image that only a slow
// registry on 127.0.0.1 has: the old container keeps running through the pull and
// stops only once the image is present, and the new one starts after it exited. Before
// that, an edit to an image the registry does not have leaves the old container
// running through the failed pulls and their back-off. It reports the time between the
// old container's exit and the new one's start, beside that of an edit whose image is
// present.
func TestEditPullsBeforeStoppingTheOldPod(t *testing.T) {
	n := newNode(t)
	sp := n.start()
	reg := testenv.StartRegistry(t, "", "")
	// Content of its own, so that none of it is in the node's store already.
	ref := reg.Push(t, "app/web:2", testenv.ImageOptions{Files: map[string]testenv.File{
		"etc/revision": {Content: []byte(t.Name() + " " + time.Now().String())}}})
	shared, web := webRevisions(t, n)
	n.write("web.yaml", web("v1", e2eImage))
	v1 := n.await("web v1 running", time.Minute, running("web-node1/main/0"))["web-node1/main/0"]
	stillV1 := func(when string) {
		t.Helper()
		cs := n.containers()
		if c := cs["web-node1/main/0"]; c.ID != v1.ID || c.PID != v1.PID || c.State != runner.StateRunning || len(cs) != 1 {
			t.Fatalf("%s: containers %v; want the old one running alone", when, summary(cs))
		}
	}

	// An image the registry does not have: three failed pulls, two back-offs (10 s, 20
	// s) between them.
	n.write("web.yaml", web("typo", reg.Host+"/app/web:typo"))
	testenv.Await(t, "three failed pulls of the typo", 2*time.Minute, func() bool {
		return n.eventCount("Failed", "app/web:typo") >= 3
	})
	stillV1("after three failed pulls of a missing image")
	if p := n.pods()["web-node1"]; !strings.Contains(p.Status.Message, "is kept") {
		t.Errorf("status while the image is missing: %q; want it to say the running revision is kept", p.Status.Message)
	}

	// A good image over a slow link.
	reg.SlowBlobs(10 * time.Second)
	n.write("web.yaml", web("v2", ref))
	edited := time.Now()
	sp.awaitLog("pulling the images of an edited pod")
	testenv.Await(t, "the slow pull to end", 2*time.Minute, func() bool {
		if n.eventCount("Pulled", "app/web:2") > 0 {
			return true
		}
		stillV1("during the pull")
		return false
	})
	pull := time.Since(edited)
	v2 := n.await("web v2 running", time.Minute, func(cs map[string]runner.Container) bool {
		c := cs["web-node1/main/0"]
		return c.PodUID != v1.PodUID && c.State == runner.StateRunning && !c.StartedAt.IsZero()
	})["web-node1/main/0"]
	gap := v2.StartedAt.Sub(stoppedAt(t, shared, "v1"))
	if gap < 0 {
		t.Fatalf("the new container started %v before the old one exited", -gap)
	}
	if pull < 10*time.Second {
		t.Errorf("the pull took %v; the registry serves each blob after 10 s", pull)
	}

	// A plain edit whose image is present, for comparison.
	n.write("web.yaml", strings.Replace(web("v3", ref), "sleep 0.05", "sleep 0.06", 1))
	v3 := n.await("web v3 running", time.Minute, func(cs map[string]runner.Container) bool {
		c := cs["web-node1/main/0"]
		return c.PodUID != v2.PodUID && c.State == runner.StateRunning && !c.StartedAt.IsZero()
	})["web-node1/main/0"]
	plain := v3.StartedAt.Sub(stoppedAt(t, shared, "v2"))
	t.Logf("slow pull %v with the old container running; old exit to new start: %v after the pull, %v for an edit with the image present",
		pull.Round(time.Millisecond), gap.Round(time.Millisecond), plain.Round(time.Millisecond))
	if gap > plain+5*time.Second {
		t.Errorf("old exit to new start took %v after a pull, %v without: the pull was not done first", gap, plain)
	}
}

// webRevisions returns a directory shared with the pods and a maker of pod web's
// manifests: revision rev, running image, touches <shared>/<rev>.stopped as it exits on
// SIGTERM, so that the file's time is the container's exit.
func webRevisions(t *testing.T, n *node) (string, func(rev, image string) string) {
	shared := n.path("shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	return shared, func(rev, image string) string {
		m := podManifest("web", "Always", "trap 'touch /shared/"+rev+".stopped; exit 0' TERM; while true; do sleep 0.05; done",
			"  volumes: [{name: shared, hostPath: {path: "+shared+"}}]\n")
		m = strings.Replace(m, "    command:", "    volumeMounts: [{name: shared, mountPath: /shared}]\n    command:", 1)
		return strings.Replace(m, "image: "+e2eImage, "image: "+image, 1)
	}
}

// TestRestartDuringAPullResumesIt kills staticpod (kill -9) while it pulls an edited
// pod's image from a slow registry: the staticpod started next pulls again before it
// stops the old container, which keeps running through both pulls.
func TestRestartDuringAPullResumesIt(t *testing.T) {
	n := newNode(t)
	sp := n.start()
	reg := testenv.StartRegistry(t, "", "")
	ref := reg.Push(t, "app/web:2", testenv.ImageOptions{Files: map[string]testenv.File{
		"etc/revision": {Content: []byte(t.Name() + " " + time.Now().String())}}})
	shared, web := webRevisions(t, n)
	n.write("web.yaml", web("v1", e2eImage))
	v1 := n.await("web v1 running", time.Minute, running("web-node1/main/0"))["web-node1/main/0"]
	reg.SlowBlobs(10 * time.Second)
	n.write("web.yaml", web("v2", ref))
	sp.awaitLog("pulling the images of an edited pod")
	sp.kill9()

	sp = n.start()
	sp.awaitLog("pulling the images of an edited pod")
	testenv.Await(t, "the resumed pull to end", 2*time.Minute, func() bool {
		if n.eventCount("Pulled", "Successfully pulled image \""+ref) > 0 {
			return true
		}
		cs := n.containers()
		if c := cs["web-node1/main/0"]; c.ID != v1.ID || c.PID != v1.PID || c.State != runner.StateRunning || len(cs) != 1 {
			t.Fatalf("during the resumed pull: containers %v; want the old one running alone", summary(cs))
		}
		return false
	})
	v2 := n.await("web v2 running", time.Minute, func(cs map[string]runner.Container) bool {
		c := cs["web-node1/main/0"]
		return c.PodUID != v1.PodUID && c.State == runner.StateRunning && !c.StartedAt.IsZero()
	})["web-node1/main/0"]
	gap := v2.StartedAt.Sub(stoppedAt(t, shared, "v1"))
	t.Logf("after a restart in the middle of a pull: old exit to new start %v", gap.Round(time.Millisecond))
	if gap < 0 {
		t.Fatalf("the new container started %v before the old one exited", -gap)
	}
}

// stoppedAt is when revision rev's container exited (the file its SIGTERM trap touched).
func stoppedAt(t *testing.T, shared, rev string) time.Time {
	t.Helper()
	fi, err := os.Stat(filepath.Join(shared, rev+".stopped"))
	if err != nil {
		t.Fatalf("revision %s never exited on SIGTERM: %v", rev, err)
	}
	return fi.ModTime()
}

// eventCount is the count of the daemon's events of reason whose message mentions
// about.
func (n *node) eventCount(reason, about string) int {
	n.t.Helper()
	code, body := n.apiGet("/events")
	var recs []events.Record
	if code != http.StatusOK || json.Unmarshal(body, &recs) != nil {
		n.t.Fatalf("GET /events = %d %s", code, body)
	}
	count := 0
	for _, r := range recs {
		if r.Reason == reason && strings.Contains(r.Message, about) {
			count += r.Count
		}
	}
	return count
}
