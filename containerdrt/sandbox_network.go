package containerdrt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/containers"

	"github.com/staticpod/staticpod/containerdrt/pins"
	"github.com/staticpod/staticpod/containerdrt/podnet"
	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/internal/atomicfile"
	"github.com/staticpod/staticpod/internal/proc"
	"github.com/staticpod/staticpod/runner"
)

// netRecordFile in a sandbox's pin directory is its podnet.Record, for a teardown after
// containerd lost the sandbox's record.
const netRecordFile = "network.json"

// attachNetwork sets up a's pod network for sandbox id in the network namespace pinned
// in its pin directory, and records its IPs in its labels. The record is written to the pin
// directory first, so that a staticpod killed meanwhile leaves what tears it down.
// What the plugins did is undone when it fails.
func (r *Runtime) attachNetwork(ctx context.Context, id string, a *podnet.Attachment) error {
	dir := r.pinDir(id)
	data, _ := json.Marshal(a.Record)
	if err := atomicfile.WriteFile(filepath.Join(dir, netRecordFile), data, 0o600); err != nil {
		return fmt.Errorf("set up pod network: %w", err)
	}
	netns := filepath.Join(dir, pins.Net.File)
	start := time.Now()
	ips, err := a.Setup(ctx, id, netns)
	if err == nil {
		r.log.Debug("set up pod network", "id", id, "ips", ips, "duration", time.Since(start))
		_, err = r.setLabels(ctx, id, map[string]string{labelPodIPs: podIPsLabel(ips)})
	}
	if err != nil {
		if derr := r.net.Teardown(ctx, id, a.Record, netns); derr != nil {
			r.log.Warn("undo a pod network that failed to set up", "id", id, "err", derr)
		}
		return fmt.Errorf("set up pod network: %w", err)
	}
	return nil
}

// noPodIPs is labelPodIPs of a sandbox whose network gave it no address: the label is
// there, so the setup is known to have finished (see interruptedNetworkSetup).
const noPodIPs = "none"

// podIPsLabel is the value of labelPodIPs for ips.
func podIPsLabel(ips []string) string {
	if len(ips) == 0 {
		return noPodIPs
	}
	return strings.Join(ips, ",")
}

// interruptedNetworkSetup reports whether info is a sandbox whose pod network a
// staticpod was setting up when it stopped: one with a network to tear down but no IPs
// recorded, made before this Runtime. Its network may be half made, and its pod never
// learnt its address; nothing of the pod ran in it yet (containers start once the
// setup is recorded).
func (r *Runtime) interruptedNetworkSetup(info containers.Container) bool {
	l := info.Labels
	return l[LabelKind] == string(runner.KindSandbox) && l[labelNetwork] != "" && l[labelPodIPs] == "" &&
		l[labelFinishedAt] == "" && info.CreatedAt.Before(r.started)
}

// endInterruptedSetup stops a sandbox whose network setup was interrupted, tearing its
// network down: its pod starts over in a new sandbox, as a kubelet's pod does when its
// sandbox has no IP. The plugins the stopped staticpod was running for it are ended
// first: one still adding would leave its rules after the teardown. List reports it
// unknown meanwhile; a stop that fails is tried again by the next repair.
func (rp *repairer) endInterruptedSetup(ctx context.Context, info containers.Container) {
	rp.rt.log.Warn("the pod network of a sandbox was being set up when staticpod stopped: its pod starts over in a new sandbox", "id", info.ID)
	if pids := shims.EndPluginRuns(proc.Root, info.ID, rp.rt.net.BinDirs()); len(pids) > 0 {
		rp.rt.log.Warn("ended the network plugins a stopped staticpod left running for the sandbox", "id", info.ID, "pids", pids)
	}
	if err := rp.rt.StopContainer(ctx, info.ID, 0); err != nil {
		rp.rt.log.Warn("stop a sandbox whose network setup was interrupted", "id", info.ID, "err", err)
	}
}

// releaseNetwork tears down the pod network of sandbox id, if it has one, in its
// pinned network namespace while that still holds (without it otherwise). It reports
// whether there was one; the caller forgets it (labelNetwork).
func (r *Runtime) releaseNetwork(ctx context.Context, id string, labels map[string]string) (bool, error) {
	rec, ok := r.netRecordOf(id, labels)
	if !ok {
		return false, nil
	}
	netns := filepath.Join(r.pinDir(id), pins.Net.File)
	if !pins.IsNamespace(netns) {
		netns = ""
	}
	return true, r.net.Teardown(ctx, id, rec, netns)
}

// netRecordOf is the network record of sandbox id, from its labels or, failing them
// (no label; one without the configuration), its pin directory; ok is false when the
// sandbox has no pod network to tear down.
func (r *Runtime) netRecordOf(id string, labels map[string]string) (rec podnet.Record, ok bool) {
	if v := labels[labelNetwork]; v != "" && json.Unmarshal([]byte(v), &rec) == nil && len(rec.Conf) > 0 {
		return rec, true
	}
	var fromFile podnet.Record
	if data, err := os.ReadFile(filepath.Join(r.pinDir(id), netRecordFile)); err == nil && json.Unmarshal(data, &fromFile) == nil {
		return fromFile, true
	}
	return rec, labels[labelNetwork] != ""
}

// stopNetwork tears down the pod network of a sandbox process (not pinned namespaces:
// see stopPinned) before the process is stopped, and unpins its network namespace.
func (r *Runtime) stopNetwork(ctx context.Context, id string, labels map[string]string) error {
	if labels[LabelKind] != string(runner.KindSandbox) {
		return nil
	}
	released, err := r.releaseNetwork(ctx, id, labels)
	if err != nil || !released {
		return err
	}
	r.pinMu.Lock()
	err = pins.Unpin(r.pinDir(id))
	r.pinMu.Unlock()
	if err != nil {
		return err
	}
	_, err = r.setLabels(ctx, id, map[string]string{labelNetwork: ""})
	return ignoreNotFound(err)
}
