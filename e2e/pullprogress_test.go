package e2e

import (
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// TestFirstPullShowsItsProgress starts a pod whose image comes slowly (some MB at
// 512 KiB/s): while it is pulled, ps -o wide lists the pod as pulling with the bytes
// fetched of the total, and /readyz/pods still says the pod has not synced; then it
// runs. An edit to another slow image shows the pending revision's pull the same way,
// and describe its message, while the running revision runs on.
func TestFirstPullShowsItsProgress(t *testing.T) {
	n := newNode(t)
	n.start()
	reg := testenv.StartRegistry(t, "", "")
	noise := make([]byte, 3<<20) // does not compress: the layer is as big
	rand.NewChaCha8([32]byte{}).Read(noise)
	ref := reg.Push(t, "app/big:1", testenv.ImageOptions{Files: map[string]testenv.File{
		"noise": {Content: noise}, "etc/revision": {Content: []byte(t.Name() + " " + time.Now().String())}}})
	reg.ThrottleBlobs(512 << 10)
	manifest := func(ref string) string {
		return strings.Replace(podManifest("big", "Always", "while true; do sleep 1; done"), "image: "+e2eImage, "image: "+ref, 1)
	}
	n.write("big.yaml", manifest(ref))

	seen := awaitPullShown(t, n, func() {
		if code, body := n.apiGet("/readyz/pods"); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz/pods during the first pull: %d %s; want 503: the pod has not synced", code, body)
		}
	})
	if m := pullingRow.FindStringSubmatch(seen[0]); m[2] != "4.3" {
		t.Errorf("total %s MB, want the layers' and config's: 4.3 MB", m[2])
	}
	v1 := n.await("big running", 2*time.Minute, running("big-node1/main/0"))["big-node1/main/0"]
	out, _, _ := runSplit(t, "", nil, "ps", "-o", "wide", "--api-socket", n.path("staticpod.sock"))
	if !regexp.MustCompile(`(?m)^big-node1 +1/1 +Running `).MatchString(out) {
		t.Errorf("ps -o wide once it runs:\n%s", out)
	}

	noise[0]++ // another layer, as big
	ref2 := reg.Push(t, "app/big:2", testenv.ImageOptions{Files: map[string]testenv.File{"noise": {Content: noise}}})
	n.write("big.yaml", manifest(ref2))
	var described string
	awaitPullShown(t, n, func() {
		if c := n.containers()["big-node1/main/0"]; c.ID != v1.ID || c.State != runner.StateRunning {
			t.Errorf("the running revision during the edit's pull: %+v; want it running", c)
		}
		if described == "" { // at the first sight of the pull, well before its end
			described, _, _ = runSplit(t, "", nil, "describe", "big-node1", "--api-socket", n.path("staticpod.sock"))
		}
	})
	out = described
	t.Logf("describe during the edit's pull:\n%s", out)
	want := regexp.MustCompile(`(?m)^    State: +Waiting\n      Reason: +ContainerCreating\n      Message: +Pulling image "` + regexp.QuoteMeta(ref2) + `": [0-9.]+ MB of 4.3 MB\n`)
	if !want.MatchString(out) {
		t.Errorf("describe during the edit's pull lacks the pull's progress under the container's state")
	}
}

// pullingRow is big-node1's line in ps -o wide while its image is pulled.
var pullingRow = regexp.MustCompile(`(?m)^big-node1 +0/1 +Pulling ([0-9.]+)MB/([0-9.]+)MB +0 `)

// awaitPullShown awaits two rows of ps -o wide with growing bytes of a pull of
// big-node1's image, calling during at each, and returns them.
func awaitPullShown(t *testing.T, n *node, during func()) []string {
	t.Helper()
	var seen []string
	var last string
	testenv.Await(t, "ps -o wide to show the pull's bytes twice", time.Minute, func() bool {
		out, _, _ := runSplit(t, "", nil, "ps", "-o", "wide", "--api-socket", n.path("staticpod.sock"))
		if m := pullingRow.FindStringSubmatch(out); m != nil && m[1] != "0.0" && (len(seen) == 0 || seen[len(seen)-1] != m[0]) {
			seen, last = append(seen, m[0]), out
			during()
		}
		return len(seen) >= 2
	})
	t.Logf("ps -o wide during the pull:\n%s", last)
	return seen
}
