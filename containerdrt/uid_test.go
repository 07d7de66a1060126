package containerdrt

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/oci"
	"k8s.io/apimachinery/pkg/types"
)

// logBuffer collects a Runtime's log; the runtime logs from goroutines of its own too.
type logBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// A container made by hand in staticpod's namespace with the labels of a pod, but a
// pod UID that is a path or a glob, is not staticpod's: List leaves it out (warning
// once), so that the runner never removes anything after it; and the runtime refuses
// to build a path from such a UID even when asked to. The pod that really runs keeps
// its directory and its logs, and a directory outside the root dir is untouched.
func TestForgedUIDLabelIsIgnored(t *testing.T) {
	var log logBuffer
	r := newTestRuntime(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: good}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: c, image: "+testImage+", command: [sleep, \"3600\"]}\n")
	good := r.mustRunPod(t, pod)["c"]
	r.awaitState(t, good.ID, "running")
	podDir := filepath.Join(r.cfg.RootDir, podsDir, string(pod.UID))
	logDir := filepath.Dir(filepath.Dir(good.LogPath))
	victim := t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	up := strings.Repeat("../", strings.Count(filepath.Join(r.cfg.RootDir, podsDir), "/"))
	forged := map[string]types.UID{
		"forged-glob":   "*",
		"forged-escape": types.UID("aaaaaaaa/" + up + strings.TrimPrefix(victim, "/")),
		"forged-empty":  "",
	}
	goodInfo, err := r.client.ContainerService().Get(r.ctx, good.ID)
	if err != nil {
		t.Fatal(err)
	}
	for id, uid := range forged {
		labels := map[string]string{}
		for k, v := range goodInfo.Labels {
			labels[k] = v
		}
		labels[LabelPodUID] = string(uid)
		if _, err := r.client.NewContainer(r.ctx, id, client.WithContainerLabels(labels), client.WithNewSpec(oci.WithProcessArgs("true"))); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.client.ContainerService().Delete(context.WithoutCancel(r.ctx), id) })
	}

	for range 2 {
		all, err := r.relist(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range all {
			ids = append(ids, c.ID)
		}
		if len(all) != 1 || all[0].ID != good.ID || all[0].PodUID != pod.UID {
			t.Errorf("List = %v, want only the real pod's container %s", ids, good.ID)
		}
	}
	if n := log.count("container ignored"); n != len(forged) {
		t.Errorf("%d warnings of an ignored container over two lists, want one for each of the %d forged ones:\n%s", n, len(forged), log.buf.String())
	}

	for _, uid := range forged {
		if err := r.RemovePodData(r.ctx, uid); err == nil {
			t.Errorf("RemovePodData(%q) = nil, want an error", uid)
		}
	}
	for _, dir := range []string{podDir, logDir, filepath.Join(victim, "keep")} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s is gone: %v", dir, err)
		}
	}
	if entries, _ := os.ReadDir(victim); len(entries) != 1 {
		t.Errorf("the directory outside holds %d entries, want its one file", len(entries))
	}
}
