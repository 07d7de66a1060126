package containerdrt

import (
	"path/filepath"
	"strings"
	"testing"

	hostapparmor "github.com/containerd/containerd/v2/pkg/apparmor"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// A container's appArmorProfile reaches its spec as containerd's CRI makes it: where
// the host can confine, RuntimeDefault runs under containerd's default profile (loaded
// first); where it cannot (this test's host, without AppArmor: the VM test proves the
// other side), the container is not created, rather than run unconfined. Unconfined
// runs either way, with no profile.
func TestAppArmorProfileOfContainer(t *testing.T) {
	r := newTestRuntime(t)
	pod := loadPod(t, `apiVersion: v1
kind: Pod
metadata: {name: aa}
spec:
  containers:
  - {name: confined, image: `+testImage+`, command: [sleep, "1000"], securityContext: {appArmorProfile: {type: RuntimeDefault}}}
  - {name: unconfined, image: `+testImage+`, command: [sleep, "1000"], securityContext: {appArmorProfile: {type: Unconfined}}}
`)
	profileOf := func(name string) (string, error) {
		t.Helper()
		c := &pod.Spec.Containers[0]
		if name == "unconfined" {
			c = &pod.Spec.Containers[1]
		}
		img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: c.Image, Policy: c.ImagePullPolicy})
		if err != nil {
			t.Fatalf("EnsureImage: %v", err)
		}
		created, err := r.create(runner.CreateRequest{Pod: pod, Container: c, Hash: manifests.ContainerHash(c), Image: img})
		if err != nil {
			return "", err
		}
		t.Cleanup(func() { r.mustRemove(t, created.ID) })
		ctr, err := r.client.LoadContainer(r.ctx, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ctr.Spec(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s.Process.ApparmorProfile, nil
	}
	if got, err := profileOf("unconfined"); err != nil || got != "" {
		t.Errorf("Unconfined: profile %q, %v; want none", got, err)
	}
	got, err := profileOf("confined")
	switch {
	case hostapparmor.HostSupports():
		if err != nil || got != spec.DefaultAppArmorProfile {
			t.Errorf("RuntimeDefault on a host with AppArmor: profile %q, %v; want %s", got, err, spec.DefaultAppArmorProfile)
		}
	case err == nil:
		t.Errorf("RuntimeDefault on a host without AppArmor: created with profile %q, want an error", got)
	case !strings.Contains(err.Error(), `container "confined": appArmorProfile RuntimeDefault: apparmor is not supported`):
		t.Errorf("RuntimeDefault on a host without AppArmor: %v, want containerd's 'apparmor is not supported'", err)
	}
}

func TestAppArmorLoadedReadsTheProfilesList(t *testing.T) {
	profiles := filepath.Join(t.TempDir(), "profiles")
	podtest.WriteFile(t, profiles, "cri-containerd.apparmor.d (enforce)\nk8s-web (complain)\n/usr/bin/man (enforce)\n")
	for name, want := range map[string]bool{"k8s-web": true, "cri-containerd.apparmor.d": true, "/usr/bin/man": true, "k8s": false, "k8s-web-2": false} {
		if got, err := appArmorLoaded(profiles, name); err != nil || got != want {
			t.Errorf("appArmorLoaded(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
}
