package poddir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// tree describes what a volume dir shows a container: each file reached through the
// top names, with its mode and content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		filepath.WalkDir(filepath.Join(dir, e.Name())+"/", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			info, err := os.Stat(path)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			out[rel] = info.Mode().Perm().String() + " " + string(data)
			return nil
		})
		if !e.IsDir() && e.Type()&fs.ModeSymlink != 0 {
			if info, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && !info.IsDir() {
				data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
				out[e.Name()] = info.Mode().Perm().String() + " " + string(data)
			}
		}
	}
	return out
}

func TestVolumeFiles(t *testing.T) {
	mode := func(m int32) *int32 { return &m }
	in := spec.Input{Pod: podtest.Pod("web"), Objects: podtest.Objects("fast")}
	in.Pod.Labels = map[string]string{"app": "web"}
	for _, tc := range []struct {
		name string
		vol  corev1.VolumeSource
		want map[string]string
		err  string
	}{
		{"every key", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, DefaultMode: mode(0o640)}},
			map[string]string{"mode": "-rw-r----- fast", "app.conf": "-rw-r----- level=info\n"}, ""},
		{"items with modes", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: mode(0o644),
			Items: []corev1.KeyToPath{{Key: "password", Path: "db/password", Mode: mode(0o400)}}}},
			map[string]string{"db/password": "-r-------- s3cret"}, ""},
		{"projected", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: mode(0o444), Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Items: []corev1.KeyToPath{{Key: "mode", Path: "mode"}}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: new(true)}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
		}}}, map[string]string{"mode": "-r--r--r-- fast", "password": "-r--r--r-- s3cret", "labels": `-r--r--r-- app="web"`}, ""},
		{"optional key missing", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Optional: new(true),
			Items: []corev1.KeyToPath{{Key: "nope", Path: "nope"}}}}, map[string]string{}, ""},
		{"missing object", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "gone"}}, nil, `secret "gone" not found`},
		{"missing key", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"},
			Items: []corev1.KeyToPath{{Key: "nope", Path: "nope"}}}}, nil, "ConfigMap kube-system/app references non-existent key: nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vol := &corev1.Volume{Name: "v", VolumeSource: tc.vol}
			files, err := volumeFiles(in, vol)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("volumeFiles = %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for path, f := range files {
				got[path] = f.mode.String() + " " + string(f.data)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("volumeFiles (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriteProjectedSwapsAtomically checks the kubelet's layout: files in a timestamped
// dir behind ..data, top names linked through it, an update a new dir swapped in (the
// old one removed), keys that went removed, and nothing rewritten when nothing changed.
func TestWriteProjectedSwapsAtomically(t *testing.T) {
	dir := t.TempDir()
	files := map[string]projectedFile{"mode": {[]byte("fast"), 0o644}, "conf/app.conf": {[]byte("x"), 0o600}}
	if changed, err := writeProjected(dir, files, owner{-1, -1}); err != nil || !changed {
		t.Fatalf("first write = %v, %v; want a change", changed, err)
	}
	first, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil || !strings.HasPrefix(first, "..20") {
		t.Fatalf("..data -> %q, %v; want a timestamped dir", first, err)
	}
	for name, target := range map[string]string{"mode": "..data/mode", "conf": "..data/conf"} {
		if got, err := os.Readlink(filepath.Join(dir, name)); got != target || err != nil {
			t.Errorf("%s -> %q, %v; want %s", name, got, err, target)
		}
	}
	if diff := cmp.Diff(map[string]string{"mode": "-rw-r--r-- fast", "conf/app.conf": "-rw------- x"}, tree(t, dir)); diff != "" {
		t.Errorf("volume (-want +got):\n%s", diff)
	}
	if changed, err := writeProjected(dir, files, owner{-1, -1}); err != nil || changed {
		t.Errorf("same files again = %v, %v; want no change", changed, err)
	}

	if changed, err := writeProjected(dir, map[string]projectedFile{"mode": {[]byte("slow"), 0o644}}, owner{-1, -1}); err != nil || !changed {
		t.Fatalf("update = %v, %v; want a change", changed, err)
	}
	second, _ := os.Readlink(filepath.Join(dir, dataLink))
	if second == first {
		t.Errorf("..data still points to %s after an update", first)
	}
	if diff := cmp.Diff(map[string]string{"mode": "-rw-r--r-- slow"}, tree(t, dir)); diff != "" {
		t.Errorf("volume after the update (-want +got):\n%s", diff)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{second, dataLink, "mode"}, names); diff != "" {
		t.Errorf("volume dir entries (-want +got):\n%s", diff)
	}
	if _, err := writeProjected(dir, map[string]projectedFile{"../escape": {nil, 0o644}}, owner{-1, -1}); err == nil {
		t.Error("a path leaving the volume was written")
	}
}

// TestObjectVolumesInPodDir: PreparePod puts secret and projected volumes on a tmpfs
// of their own and configMap volumes on disk, fills them, SyncVolumes updates them in
// place, a missing object is a CreateContainerConfigError, and Remove unmounts
// every tmpfs.
func TestObjectVolumesInPodDir(t *testing.T) {
	requireRoot(t)
	fakeHostFiles(t, "127.0.0.1 localhost\n", hostResolv)
	pod := podtest.Pod("web")
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
	}
	root := t.TempDir()
	podDir := filepath.Join(root, "pods", string(pod.UID))
	if err := PreparePod(pod, podDir, podDir, "", podtest.Objects("fast")); err != nil {
		t.Fatal(err)
	}
	mounts := podtest.MountsAt(t, podDir)
	if len(mounts) != 1 || mounts[0].FSType != "tmpfs" || mounts[0].Mountpoint != volumeDir(podDir, "creds") {
		t.Fatalf("mounts under the pod dir = %v, want one tmpfs at volumes/creds", podtest.DescribeMounts(mounts))
	}
	if got := tree(t, volumeDir(podDir, "creds"))["password"]; got != "-rw-r--r-- s3cret" {
		t.Errorf("secret volume file password = %q", got)
	}
	if changed, err := SyncVolumes(pod, podDir, "", podtest.Objects("slow")); err != nil || !slices.Equal(changed, []string{"cfg"}) {
		t.Fatalf("SyncVolumes = %v, %v; want volume cfg changed", changed, err)
	}
	if got := tree(t, volumeDir(podDir, "cfg"))["mode"]; got != "-rw-r--r-- slow" {
		t.Errorf("configMap volume after SyncVolumes: mode = %q, want slow", got)
	}
	if _, err := SyncVolumes(pod, podDir, "", manifests.NewObjects()); err == nil || !strings.Contains(err.Error(), `configmap "app" not found`) {
		t.Errorf("SyncVolumes without the objects = %v, want both named", err)
	}
	if got := tree(t, volumeDir(podDir, "cfg"))["mode"]; got != "-rw-r--r-- slow" {
		t.Errorf("configMap volume after a failed sync: mode = %q, want it kept", got)
	}
	if err := PreparePod(pod, podDir, podDir, "", manifests.NewObjects()); !errors.Is(err, runner.ErrCreateConfig) {
		t.Errorf("PreparePod without the objects = %v, want a CreateContainerConfigError", err)
	}
	if err := Remove(podDir); err != nil {
		t.Fatal(err)
	}
	if m := podtest.MountsAt(t, root); len(m) > 0 {
		t.Errorf("mounts left after Remove: %v", podtest.DescribeMounts(m))
	}
}
