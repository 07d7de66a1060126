package e2e

import (
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
)

// TestFirstPullShowsItsProgress starts a pod whose image comes slowly (some MB at
// 512 KiB/s): while it is pulled, ps -o wide lists the pod as pulling with the bytes
// fetched of the total, and /readyz/pods still says the pod has not synced; then it
// runs.
func TestFirstPullShowsItsProgress(t *testing.T) {
	n := newNode(t)
	n.start()
	reg := testenv.StartRegistry(t, "", "")
	noise := make([]byte, 3<<20) // does not compress: the layer is as big
	rand.NewChaCha8([32]byte{}).Read(noise)
	ref := reg.Push(t, "app/big:1", testenv.ImageOptions{Files: map[string]testenv.File{
		"noise": {Content: noise}, "etc/revision": {Content: []byte(t.Name() + " " + time.Now().String())}}})
	reg.ThrottleBlobs(512 << 10)
	n.write("big.yaml", strings.Replace(podManifest("big", "Always", "while true; do sleep 1; done"), "image: "+e2eImage, "image: "+ref, 1))

	pulling := regexp.MustCompile(`(?m)^big-node1 +0/1 +Pulling ([0-9.]+)MB/([0-9.]+)MB +0 `)
	var seen []string
	testenv.Await(t, "ps -o wide to show the pull's bytes twice", time.Minute, func() bool {
		out, _, _ := runSplit(t, "", nil, "ps", "-o", "wide", "--api-socket", n.path("staticpod.sock"))
		if m := pulling.FindStringSubmatch(out); m != nil && m[1] != "0.0" && (len(seen) == 0 || seen[len(seen)-1] != m[0]) {
			seen = append(seen, m[0])
			if code, body := n.apiGet("/readyz/pods"); code != http.StatusServiceUnavailable {
				t.Errorf("/readyz/pods during the first pull: %d %s; want 503: the pod has not synced", code, body)
			}
		}
		return len(seen) >= 2
	})
	t.Logf("ps -o wide during the pull:\n%s", strings.Join(seen, "\n"))
	if m := pulling.FindStringSubmatch(seen[0]); m[2] != "4.3" {
		t.Errorf("total %s MB, want the layers' and config's: 4.3 MB", m[2])
	}
	n.await("big running", 2*time.Minute, running("big-node1/main/0"))
	out, _, _ := runSplit(t, "", nil, "ps", "-o", "wide", "--api-socket", n.path("staticpod.sock"))
	if !regexp.MustCompile(`(?m)^big-node1 +1/1 +Running `).MatchString(out) {
		t.Errorf("ps -o wide once it runs:\n%s", out)
	}
}
