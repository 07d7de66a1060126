package containerdrt

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/internal/podtest"
	"github.com/staticpod/staticpod/runner"
)

// subPathPod is a pod whose containers share the emptyDir "shared": "writer" mounts
// all of it at /shared, each other container named in subPaths mounts its subPath at
// /sub.
func subPathPod(subPaths map[string]string) *corev1.Pod {
	pod := podtest.Pod("web")
	pod.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers = []corev1.Container{{Name: "writer", VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}}}
	for name, sub := range subPaths {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/sub", SubPath: sub}}})
	}
	return pod
}

// outsideDir is a host directory out of every volume, holding the file "marker".
func outsideDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	podtest.WriteFile(t, filepath.Join(dir, "marker"), "outside\n")
	return dir
}

// A container that makes a subPath of a shared emptyDir a symlink out of the volume
// gets the other container refused, in the kubelet's words; a symlink that stays in
// the volume is followed.
func TestMountsSubPathSymlinkOutOfTheVolumeIsRefused(t *testing.T) {
	e := newMountsEnv(t)
	outside := outsideDir(t)
	pod := subPathPod(map[string]string{"victim": "sub", "reader": "inside"})
	podDir := e.mustPrepare(pod, "127.0.0.1")
	e.mustSucceed(pod, podDir, "writer", "ln -s "+outside+" /shared/sub; mkdir /shared/real; echo in > /shared/real/file; ln -s real /shared/inside")

	_, err := e.mountOpts(pod, podDir, "victim")
	want := `failed to prepare subPath for volumeMount "shared" of container "victim"`
	if !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), want) {
		t.Errorf("mountOpts(victim) = %v, want a %v saying %q", err, runner.ErrCreateConfig, want)
	}
	if out := e.mustSucceed(pod, podDir, "reader", "ls -A /sub"); out != "file\n" {
		t.Errorf("ls /sub through a symlink in the volume = %q, want %q", out, "file\n")
	}
}

// A container that swaps a subPath of a shared emptyDir between a directory and a
// symlink to a host directory, as fast as it can, while the other container is made
// again and again, never gets that container the host directory: each time it either
// mounts the directory or is refused.
func TestMountsSubPathSwappedForASymlinkNeverLeadsOut(t *testing.T) {
	e := newMountsEnv(t)
	outside := outsideDir(t)
	pod := subPathPod(map[string]string{"victim": "sub"})
	podDir := e.mustPrepare(pod, "127.0.0.1")
	vol := filepath.Join(podDir, "volumes", "shared") // the emptyDir
	if err := os.Mkdir(filepath.Join(vol, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	podtest.WriteFile(t, filepath.Join(vol, "sub", "inner"), "inside\n")
	if err := os.Symlink(outside, filepath.Join(vol, "alt")); err != nil {
		t.Fatal(err)
	}

	var swaps atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the writer container's part, from the host: rename(2) is all it takes
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(vol, "sub"), unix.AT_FDCWD, filepath.Join(vol, "alt"), unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap: %v", err)
				return
			}
			swaps.Add(1)
		}
	})
	defer wg.Wait()
	defer close(stop)

	// Until both outcomes have been seen a few times: which one an attempt gets depends
	// on where the swaps are when it looks. On a loaded machine the swapper can win
	// nearly every look (2 mounts in 400 attempts, seen beside other test runs); a
	// refusal costs no container, so attempts are cheap, and one of each outcome is
	// what shows that the race ran both ways.
	const enough, most = 5, 1000
	mounted, refused, attempts := 0, 0, 0
	for ; attempts < most && (mounted < enough || refused < enough); attempts++ {
		i := attempts
		opts, err := e.mountOpts(pod, podDir, "victim")
		if err != nil {
			if !errors.Is(err, runner.ErrCreateConfig) {
				t.Fatalf("attempt %d: mountOpts = %v, want a %v", i, err, runner.ErrCreateConfig)
			}
			refused++
			continue
		}
		before := swaps.Load()
		out, code := e.run("victim-"+strconv.Itoa(i), "ls -A /sub", opts...)
		switch {
		case strings.Contains(out, "marker"):
			t.Fatalf("attempt %d: the container sees the host directory %s at /sub:\n%s", i, outside, out)
		case code != 0 || out != "inner\n":
			t.Fatalf("attempt %d: ls /sub = %q (exit %d), want the subPath's %q", i, out, code, "inner\n")
		case swaps.Load() == before:
			t.Fatalf("attempt %d: no swap while the container was made", i)
		}
		mounted++
	}
	t.Logf("%d attempts: %d mounted the directory, %d refused; %d swaps", attempts, mounted, refused, swaps.Load())
	if mounted == 0 || refused == 0 {
		t.Errorf("in %d attempts, mounted %d times and refused %d: the swaps did not race the mounts both ways", attempts, mounted, refused)
	}
}
