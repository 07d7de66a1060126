package runner

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/events"
)

const imageVolumeManifest = `apiVersion: v1
kind: Secret
metadata: {name: regcred}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths": {"registry.example.com": {"username": "u", "password": "p"}}}'
---
apiVersion: v1
kind: Pod
metadata: {name: models}
spec:
  hostNetwork: true
  imagePullSecrets: [{name: regcred}]
  volumes:
  - {name: weights, image: {reference: registry.example.com/weights}}
  - {name: tools, image: {reference: registry.example.com/tools:1}}
  containers:
  - name: sidecar
    image: registry.example.com/server:1
    volumeMounts: [{name: weights, mountPath: /weights}]
  - name: server
    image: registry.example.com/server:1
    volumeMounts: [{name: weights, mountPath: /weights}, {name: tools, mountPath: /tools}]
`

// loadImageVolumePod loads imageVolumeManifest for a worker of h: a pod whose two
// containers mount the image volume weights (untagged: pulled Always), the second one
// the image volume tools too (tagged: IfNotPresent).
func loadImageVolumePod(t *testing.T, h *harness) *corev1.Pod {
	t.Helper()
	res := manifests.Load([]byte(imageVolumeManifest), manifests.Options{NodeName: "n", Source: manifests.Source{Kind: manifests.SourceFile, Location: "models.yaml"}})
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	pod := res.Pods[0]
	h.r.pub.seen[pod.UID] = t0
	h.setObjects(manifests.SourceFile, res.Objects())
	return pod
}

// TestImageVolumePulledWithItsPolicyAndCountedInUse: the image of each image volume
// is pulled with the volume's (defaulted) pull policy and the pod's pull secrets,
// once per sync however many containers mount it, before the containers' own image;
// each container is created with the images of the volumes it mounts; and image GC
// counts the volumes' images in use while the pod is wanted.
func TestImageVolumePulledWithItsPolicyAndCountedInUse(t *testing.T) {
	h := newHarness(t)
	pod := loadImageVolumePod(t, h)
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)

	h.f.mu.Lock()
	pulls, creates := h.f.pulls, h.f.creates
	h.f.mu.Unlock()
	type pull struct {
		Image   string
		Policy  corev1.PullPolicy
		Secrets int
	}
	var got []pull
	for _, p := range pulls {
		got = append(got, pull{p.Image, p.Policy, len(p.Secrets)})
	}
	want := []pull{
		{"registry.example.com/weights", corev1.PullAlways, 1},
		{"registry.example.com/server:1", corev1.PullIfNotPresent, 1},
		{"registry.example.com/tools:1", corev1.PullIfNotPresent, 1},
		{"registry.example.com/server:1", corev1.PullIfNotPresent, 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pulls of one sync (-want +got):\n%s", diff)
	}
	vols := map[string][]string{}
	for _, req := range creates {
		for name, img := range req.ImageVolumes {
			vols[req.Container.Name] = append(vols[req.Container.Name], name+"="+img.Ref)
		}
	}
	for _, v := range vols {
		slices.Sort(v)
	}
	wantVols := map[string][]string{
		"server":  {"tools=registry.example.com/tools:1", "weights=registry.example.com/weights"},
		"sidecar": {"weights=registry.example.com/weights"},
	}
	if diff := cmp.Diff(wantVols, vols); diff != "" {
		t.Errorf("image volumes of the containers created (-want +got):\n%s", diff)
	}

	store := &fakeImages{capacity: 100 * mib, images: []StoredImage{
		{ID: "sha256:weights", Names: []string{"example.com/registry.example.com/weights"}},
		{ID: "sha256:tools", Names: []string{"example.com/registry.example.com/tools:1"}},
		{ID: "sha256:other", Names: []string{"example.com/registry.example.com/other:1"}},
	}}
	r, err := New(Options{Runtime: newFakeRuntime(h.clock), Now: h.clock, Images: store})
	if err != nil {
		t.Fatal(err)
	}
	r.pub.setDesired(map[types.UID]*corev1.Pod{pod.UID: pod}, t0)
	images, err := r.Images(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	inUse := map[string]bool{}
	for _, img := range images {
		inUse[img.ID] = img.InUse
	}
	if diff := cmp.Diff(map[string]bool{"sha256:weights": true, "sha256:tools": true, "sha256:other": false}, inUse); diff != "" {
		t.Errorf("images in use for image GC (-want +got):\n%s", diff)
	}
}

// TestImageVolumePullFailureHoldsItsContainers: a container that mounts an image
// volume whose image cannot be pulled waits with ErrImagePull, then
// ImagePullBackOff, and an event says why; a container that does not mount it starts.
// Once the back-off is over and the pull succeeds, the container starts.
func TestImageVolumePullFailureHoldsItsContainers(t *testing.T) {
	h := newHarness(t)
	pod := loadImageVolumePod(t, h)
	h.f.pullFail = map[string]error{"registry.example.com/tools:1": fmt.Errorf("%w: registry said no", ErrImagePull)}
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	if r := w.obs.Waiting["server"].Reason; r != ReasonErrImagePull {
		t.Errorf("server waits with %q, want %s", r, ReasonErrImagePull)
	}
	if c := h.f.byName(pod.UID)["sidecar/0"]; c.State != StateRunning {
		t.Errorf("sidecar is %q, want running: it does not mount the volume that failed", c.State)
	}
	var failed []string
	for _, e := range h.r.events.Pod(pod.UID) {
		if e.Type == events.Warning && e.Reason == "Failed" {
			failed = append(failed, e.Container+": "+e.Message)
		}
	}
	wantFailed := []string{
		`: Failed to pull image "registry.example.com/tools:1": ErrImagePull: registry said no`,
		"server: Error: ErrImagePull: registry said no",
	}
	if diff := cmp.Diff(wantFailed, failed); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}

	h.sync(w)
	if r := w.obs.Waiting["server"].Reason; r != ReasonImagePullBackOff {
		t.Errorf("server waits with %q in the back-off, want %s", r, ReasonImagePullBackOff)
	}
	h.f.mu.Lock()
	h.f.pullFail = nil
	h.f.mu.Unlock()
	h.tick(pullBackoffInitial + time.Second)
	h.sync(w)
	if c := h.f.byName(pod.UID)["server/0"]; c.State != StateRunning {
		t.Errorf("after the back-off server is %q, want running", c.State)
	}
}
