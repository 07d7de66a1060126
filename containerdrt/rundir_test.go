package containerdrt

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpod/staticpod/containerdrt/poddir"
)

// A pod's /etc files, /dev/shm and termination logs and its pinned namespaces are in
// the run dir, its volumes in its root dir's pod directory; a pod whose files an
// earlier staticpod put in its pod directory keeps them there, for its containers to
// share them; RemovePodData removes both places.
func TestRunDirHoldsThePodsFilesOfOneBoot(t *testing.T) {
	r := newTestRuntime(t)
	runDir, rootDir := r.Runtime.cfg.RunDir, r.Runtime.cfg.RootDir
	if runDir != filepath.Join(rootDir, "run") {
		t.Fatalf("run dir %s, want %s/run by default", runDir, rootDir)
	}
	manifest := func(name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  volumes: [{name: scratch, emptyDir: {}}]\n" +
			"  containers:\n  - {name: c, image: " + testImage + ", command: [sleep, \"3600\"], volumeMounts: [{name: scratch, mountPath: /scratch}]}\n"
	}
	for _, tc := range []struct {
		name   string
		legacy bool // the pod's directory holds its /etc/hostname already
	}{{"fresh", false}, {"earlier", true}} {
		pod := loadPod(t, manifest(tc.name))
		podDir := filepath.Join(rootDir, podsDir, string(pod.UID))
		files := filepath.Join(runDir, podsDir, string(pod.UID))
		if tc.legacy {
			files = podDir
			if err := os.MkdirAll(podDir, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(podDir, poddir.HostnameFile), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cs := r.mustRunPod(t, pod)
		c, err := r.client.LoadContainer(r.ctx, cs["c"].ID)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Spec(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		mounts := map[string]specs.Mount{}
		for _, m := range s.Mounts {
			mounts[m.Destination] = m
		}
		for dst, dir := range map[string]string{"/etc/hosts": files, "/etc/hostname": files, "/etc/resolv.conf": files,
			"/dev/shm": files, "/dev/termination-log": files, "/scratch": podDir} {
			if src := mounts[dst].Source; !strings.HasPrefix(src, dir+"/") {
				t.Errorf("%s: %s is mounted from %q, want a file of %s", tc.name, dst, src, dir)
			}
		}
		for _, ns := range s.Linux.Namespaces {
			if ns.Type == specs.NetworkNamespace && !strings.HasPrefix(ns.Path, filepath.Join(runDir, namespacesDir)+"/") {
				t.Errorf("%s: the pod's network namespace is pinned at %q, want it in the run dir", tc.name, ns.Path)
			}
		}
		if !tc.legacy {
			if _, err := os.Lstat(filepath.Join(podDir, poddir.EtcHostsFile)); err == nil {
				t.Errorf("%s: /etc/hosts is in the pod directory too", tc.name)
			}
		}
	}
	for _, dir := range []string{filepath.Join(runDir, podsDir), filepath.Join(rootDir, podsDir)} {
		if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
			t.Fatalf("%s holds %v (%v), want the pods' directories", dir, entries, err)
		}
	}
	for _, name := range []string{"fresh", "earlier"} {
		uid := loadPod(t, manifest(name)).UID
		if err := r.RemovePodData(r.ctx, uid); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{filepath.Join(runDir, podsDir, string(uid)), filepath.Join(rootDir, podsDir, string(uid))} {
			if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s after RemovePodData: %v", dir, err)
			}
		}
	}
}
