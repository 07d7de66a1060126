package poddir

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/containerdrt/userns"
)

// userNSPod is podtest's pod with hostUsers: false, an emptyDir, a configMap and a
// projected volume, and a downwardAPI one, its fsGroup fsGroup (-1 for none).
func userNSPod(fsGroup int64) *corev1.Pod {
	pod := podtest.Pod("mapped")
	pod.Spec.HostUsers = new(false)
	if fsGroup >= 0 {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: &fsGroup}
	}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "app", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
		{Name: "both", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Items: []corev1.KeyToPath{{Key: "password", Path: "sub/password"}}}},
		}}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		}}}},
	}
	return pod
}

// owners lists the owner of everything under dir (the top included), by path.
func owners(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(filepath.Dir(dir), path)
		out[rel] = fmt.Sprintf("%d:%d", st.Uid, st.Gid)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUserNamespacePodFilesOwnedByMappedIDs checks that what PreparePod and
// PrepareContainer write for a pod with hostUsers: false (its /etc files, volumes,
// termination log and /dev/shm) belongs to the pod's mapped root, volume files to the
// mapped fsGroup, and that SyncVolumes then finds the volumes as they should be,
// rewriting nothing.
func TestUserNamespacePodFilesOwnedByMappedIDs(t *testing.T) {
	fakeHostFiles(t, "127.0.0.1 localhost\n", "nameserver 192.0.2.53\n")
	for _, fsGroup := range []int64{-1, 2000} {
		t.Run(fmt.Sprintf("fsGroup %d", fsGroup), func(t *testing.T) {
			pod := userNSPod(fsGroup)
			pods := t.TempDir()
			m, err := userns.New(pods).Get(string(pod.UID))
			if err != nil {
				t.Fatal(err)
			}
			podDir := filepath.Join(pods, string(pod.UID))
			t.Cleanup(func() { Remove(podDir) })
			objs := podtest.Objects("fast")
			if err := PreparePod(pod, podDir, podDir, "192.0.2.10", objs); err != nil {
				t.Fatalf("PreparePod: %v", err)
			}
			in := spec.Input{Pod: pod, Container: &pod.Spec.Containers[0], PodDir: podDir, RunDir: podDir, SandboxNS: "/proc/1/ns", UserNSHostID: m.HostID, Objects: objs}
			in.Container.TerminationMessagePath = "/dev/termination-log"
			if _, err := PrepareContainer(in); err != nil {
				t.Fatalf("PrepareContainer: %v", err)
			}
			root := fmt.Sprintf("%d:%d", m.HostID, m.HostID)
			group := root
			if fsGroup >= 0 {
				group = fmt.Sprintf("%d:%d", m.HostID, int64(m.HostID)+fsGroup)
			}
			for _, f := range []string{etcHostsFile, hostnameFile, resolvConfFile, shmDir, filepath.Join(volumesDir, "scratch"),
				TerminationLogPath("", in.Container.Name, 0)} {
				for path, got := range owners(t, filepath.Join(podDir, f)) {
					if got != root {
						t.Errorf("%s is owned by %s, want the mapped root %s", path, got, root)
					}
				}
			}
			for _, vol := range []string{"app", "both", "info"} {
				for path, got := range owners(t, filepath.Join(podDir, volumesDir, vol)) {
					info, _ := os.Lstat(filepath.Join(podDir, volumesDir, path))
					want := root
					if vol != "info" && info != nil && info.Mode().IsRegular() {
						want = group
					}
					if got != want {
						t.Errorf("%s is owned by %s, want %s", path, got, want)
					}
				}
			}
			changed, err := SyncVolumes(pod, podDir, "192.0.2.10", objs)
			if err != nil || len(changed) > 0 {
				t.Errorf("SyncVolumes of unchanged volumes = %v, %v; want nothing rewritten", changed, err)
			}
		})
	}
}

// TestUserNamespacePodWithoutMappingIsRefused checks that a pod with hostUsers: false
// whose directory records no mapping gets no files owned by the host's root.
func TestUserNamespacePodWithoutMappingIsRefused(t *testing.T) {
	fakeHostFiles(t, "127.0.0.1 localhost\n", "nameserver 192.0.2.53\n")
	pod := userNSPod(-1)
	podDir := filepath.Join(t.TempDir(), "pods", string(pod.UID))
	t.Cleanup(func() { Remove(podDir) })
	err := PreparePod(pod, podDir, podDir, "192.0.2.10", podtest.Objects("fast"))
	if err == nil || !strings.Contains(err.Error(), "no user namespace recorded") {
		t.Errorf("PreparePod = %v, want it refused for want of a mapping", err)
	}
}
