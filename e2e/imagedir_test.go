package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// A pod whose image is not there (imagePullPolicy: Never) runs as soon as an archive
// bringing the image lands in --image-dir, not when its pull back-off ends.
func TestImageArchiveWakesTheWaitingPod(t *testing.T) {
	n := newNode(t)
	images := n.path("images")
	sp := n.start("--image-dir", images)
	const ref = "docker.io/library/late:1"
	n.write("late.yaml", `apiVersion: v1
kind: Pod
metadata: {name: late}
spec:
  containers:
  - {name: main, image: late:1, imagePullPolicy: Never, command: [sleep, "3600"]}
`)
	sp.awaitLog("is not present with pull policy of Never")
	archive, err := testenv.BuildImage(testenv.ImageOptions{Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	// As an image is copied in: a temporary name, then a rename.
	tmp := filepath.Join(images, ".late.tar.tmp")
	if err := os.WriteFile(tmp, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(images, "late.tar")); err != nil {
		t.Fatal(err)
	}
	arrived := time.Now()
	n.await("the pod running", time.Minute, running("late-node1/main/0"))
	// Its first pull failed at once, so its back-off (10 s) has most of its time to run.
	// The archive is imported once it has been left alone for a second.
	if took := time.Since(arrived); took > 5*time.Second {
		t.Errorf("the pod ran %v after its image arrived; it waited out its back-off", took.Round(time.Millisecond))
	} else {
		t.Logf("the pod ran %v after its image arrived", took.Round(time.Millisecond))
	}
}

// Archives already in --image-dir are imported before any pod starts, and their
// images run pods at once (make run works this way).
func TestImageArchivesPresentAtStart(t *testing.T) {
	n := newNode(t)
	images := n.path("images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"docker.io/library/early:1", "docker.io/library/early:2"} {
		archive, err := testenv.BuildImage(testenv.ImageOptions{Ref: ref})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(images, filepath.Base(ref)+".tar"), archive, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n.write("early.yaml", `apiVersion: v1
kind: Pod
metadata: {name: early}
spec:
  containers:
  - {name: one, image: early:1, imagePullPolicy: Never, command: [sleep, "3600"]}
  - {name: two, image: early:2, imagePullPolicy: Never, command: [sleep, "3600"]}
`)
	n.start("--image-dir", images)
	n.await("the pod running", time.Minute, func(cs map[string]runner.Container) bool {
		return running("early-node1/one/0")(cs) && running("early-node1/two/0")(cs)
	})
}
