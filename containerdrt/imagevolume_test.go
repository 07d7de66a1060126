package containerdrt

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/opencontainers/image-spec/identity"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/runner"
)

// imageVolumeRef is the image the image volumes of the tests mount: the test image with
// files of its own.
const imageVolumeRef = "docker.io/library/models:imagevol-test"

// mustImportVolumeImage imports imageVolumeRef into r's namespace.
func (r *testRuntime) mustImportVolumeImage(t *testing.T) {
	t.Helper()
	ctd.Daemon(t).MustImportImage(t, r.cfg.Namespace, testenv.ImageOptions{Ref: imageVolumeRef, Files: map[string]testenv.File{
		"models/greeting.txt":   {Content: []byte("hello from the image\n")},
		"models/sub/nested.txt": {Content: []byte("nested\n")},
	}})
}

// imageVolumeViews are the keys of the image volume views of the pod uid in r's
// snapshotter.
func (r *testRuntime) imageVolumeViews(t *testing.T, uid types.UID) []string {
	t.Helper()
	var keys []string
	err := r.client.SnapshotService(r.cfg.Images.Snapshotter).Walk(r.ctx, func(_ context.Context, info snapshots.Info) error {
		if u, ok := imageVolumeUID(info.Name); ok && u == uid {
			keys = append(keys, info.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk snapshots: %v", err)
	}
	return keys
}

// TestImageVolumeMountsTheImageReadOnly: a container reads the files of an image
// volume's image, at the volume's root and through a subPath, and can write to none of
// them, though its mount says readOnly: false; the image is mounted once for the pod,
// from a view of its snapshot, and once the pod is removed neither mount nor view is
// left.
func TestImageVolumeMountsTheImageReadOnly(t *testing.T) {
	r := newTestRuntime(t)
	r.mustImportVolumeImage(t)
	pod := loadPod(t, `
apiVersion: v1
kind: Pod
metadata: {name: imagevol}
spec:
  hostNetwork: true
  restartPolicy: Never
  volumes:
  - {name: models, image: {reference: `+imageVolumeRef+`, pullPolicy: Never}}
  containers:
  - name: reader
    image: `+testImage+`
    command:
    - sh
    - -c
    - |
      cat /models/models/greeting.txt /sub/nested.txt > /dev/termination-log || exit 2
      for f in /models/x /models/models/x /sub/x; do
        if touch $f 2>/dev/null; then echo "wrote $f" >> /dev/termination-log; exit 1; fi
      done
    volumeMounts:
    - {name: models, mountPath: /models, readOnly: false}
    - {name: models, mountPath: /sub, subPath: models/sub}
`)
	cs := r.mustRunPod(t, pod)
	got := r.awaitState(t, cs["reader"].ID, runner.StateExited)
	if want := "hello from the image\nnested\n"; got.ExitCode != 0 || got.Message != want {
		t.Errorf("reader exited %d with %q, want 0 with %q: the image's files, read-only", got.ExitCode, got.Message, want)
	}
	podDir, err := r.podDir(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if views := r.imageVolumeViews(t, pod.UID); len(views) != 1 {
		t.Errorf("views of the pod's image volumes: %v, want one", views)
	}
	if m := podtest.MountsAt(t, filepath.Join(podDir, "image-volumes")); len(m) != 1 {
		t.Errorf("mounts of the pod's image volumes: %v, want one", podtest.DescribeMounts(m))
	}

	r.mustRemove(t, cs["reader"].ID)
	if err := r.RemovePodData(r.ctx, pod.UID); err != nil {
		t.Fatalf("RemovePodData: %v", err)
	}
	if views := r.imageVolumeViews(t, pod.UID); len(views) != 0 {
		t.Errorf("views left after RemovePodData: %v", views)
	}
	if m := podtest.MountsAt(t, filepath.Dir(podDir)); len(m) != 0 {
		t.Errorf("mounts left after RemovePodData: %v", podtest.DescribeMounts(m))
	}
	if _, err := os.Stat(podDir); !os.IsNotExist(err) {
		t.Errorf("pod dir after RemovePodData: %v, want it gone", err)
	}
}

// TestImageVolumeLeftoversOfAGonePodAreSwept: what a staticpod killed while it made or
// removed a pod's image volumes leaves (a view mounted in the pod's directory, a view
// never mounted) is removed by the first repair of the next staticpod when no
// container of the pod is left, and kept for a pod that has one.
func TestImageVolumeLeftoversOfAGonePodAreSwept(t *testing.T) {
	r := newTestRuntime(t)
	r.mustImportVolumeImage(t)
	img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: imageVolumeRef, Policy: "Never"})
	if err != nil {
		t.Fatal(err)
	}
	kept := r.mustCreateUnstarted(t, "keeps")
	gone, never := types.UID("0123456789abcdef0123456789abcdef"), types.UID("fedcba9876543210fedcba9876543210")
	for _, uid := range []types.UID{gone, kept.PodUID} {
		podDir, err := r.podDir(uid)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.mountImage(r.ctx, uid, podDir, img.Ref); err != nil {
			t.Fatalf("mountImage for %s: %v", uid, err)
		}
	}
	ctx, cancel := r.call(r.ctx)
	defer cancel()
	if _, err := r.client.SnapshotService(r.cfg.Images.Snapshotter).View(ctx, imageVolumeKey(never, "x"), mustChainID(t, r, img.Ref)); err != nil {
		t.Fatalf("view: %v", err)
	}

	again, err := New(r.ctx, r.cfg) // a restarted staticpod
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.relist(r.ctx); err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[types.UID]int{gone: 0, never: 0, kept.PodUID: 1} {
		if views := r.imageVolumeViews(t, uid); len(views) != want {
			t.Errorf("views of pod %s after the first repair: %v, want %d", uid, views, want)
		}
	}
	goneDir, _ := r.podDir(gone)
	if m := podtest.MountsAt(t, goneDir); len(m) != 0 {
		t.Errorf("mounts of a gone pod after the first repair: %v", podtest.DescribeMounts(m))
	}
	keptDir, _ := r.podDir(kept.PodUID)
	if m := podtest.MountsAt(t, keptDir); len(m) != 1 {
		t.Errorf("mounts of a pod with a container after the first repair: %v, want its image volume's", podtest.DescribeMounts(m))
	}
	if err := again.RemovePodData(r.ctx, kept.PodUID); err != nil {
		t.Errorf("RemovePodData: %v", err)
	}
}

// mustChainID is the chain ID of the layers of the image named ref.
func mustChainID(t *testing.T, r *testRuntime, ref string) string {
	t.Helper()
	img, err := r.client.GetImage(r.ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	diffIDs, err := img.RootFS(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return identity.ChainID(diffIDs).String()
}
