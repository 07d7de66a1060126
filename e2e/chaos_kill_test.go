package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/core/snapshots"

	"github.com/staticpod/staticpod/internal/bench"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// killChurnPods is how many pods the kill -9 scenario creates, edits and removes.
const killChurnPods = 20

// killSeeds are the seeds of the kill -9 scenario: fixed ones, so that a failure can
// be run again, and one from the clock, so that every run also tries something new.
// STATICPOD_CHAOS_SEED runs one seed alone.
func killSeeds(t *testing.T) []uint64 {
	if s := os.Getenv("STATICPOD_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STATICPOD_CHAOS_SEED=%q: %v", s, err)
		}
		return []uint64{seed}
	}
	return []uint64{1, 2, uint64(time.Now().UnixNano())}
}

// staticpod killed with SIGKILL at random points while 20 pods are created, edited and
// removed, three times per seed, then started once more: within seconds every pod its
// manifests want runs, one container each, its first attempt that never restarted;
// nothing of a pod no manifest wants is left (containers, sandboxes, pins, mounts,
// snapshots, shims, log writers, pod and log directories); and at no instant in between
// did two containers of the same name of one pod run at once.
func TestChaosKill9WhilePodsChange(t *testing.T) {
	for _, seed := range killSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d (STATICPOD_CHAOS_SEED=%d runs it again)", seed, seed)
			testKill9WhilePodsChange(t, seed, false)
		})
	}
}

// The same on a pod network (a bridge, IPs from host-local): besides, the network holds
// the wanted pods' IPs, veths and masquerade rules and nothing else, whatever the kills
// interrupted (a setup, a teardown).
func TestChaosKill9WhilePodsChangeOnAPodNetwork(t *testing.T) {
	for _, seed := range killSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d (STATICPOD_CHAOS_SEED=%d runs it again)", seed, seed)
			testKill9WhilePodsChange(t, seed, true)
		})
	}
}

func testKill9WhilePodsChange(t *testing.T, seed uint64, podNetwork bool) {
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	var n *node
	var cn *testenv.CNINetwork
	var flags []string
	if podNetwork {
		n, cn = newCNINode(t, bridgeConf)
		flags = cniFlags(cn)
	} else {
		n = newNode(t)
	}
	c := &churn{n: n, rng: rng, version: map[string]int{}}
	for i := range killChurnPods {
		c.create(fmt.Sprintf("p%02d", i))
	}
	for kill := range 3 {
		sp := n.start(flags...)
		for end := time.Now().Add(time.Duration(300+rng.IntN(2500)) * time.Millisecond); time.Now().Before(end); {
			c.step()
			time.Sleep(time.Duration(20+rng.IntN(80)) * time.Millisecond)
			c.checkNoTwins()
		}
		sp.kill9()
		t.Logf("kill %d after %d changes", kill+1, c.changes)
		for range rng.IntN(4) { // while nobody watches
			c.step()
		}
	}
	restarted := time.Now()
	n.start(flags...)
	want := c.wanted()
	cs := n.await(fmt.Sprintf("the %d wanted pods running, nothing else", len(want)), time.Minute, func(cs map[string]runner.Container) bool {
		c.checkTwins(cs)
		return converged(cs, want)
	})
	took := time.Since(restarted)
	t.Logf("%d changes; converged on %d pods %v after the last start", c.changes, len(want), took.Round(time.Millisecond))
	if took > 20*time.Second {
		t.Errorf("converged %v after the last start, want within seconds", took.Round(time.Millisecond))
	}
	for key, ctr := range cs {
		if ctr.Attempt != 0 {
			t.Errorf("%s: attempt %d, want 0: a container that never exits was started again", key, ctr.Attempt)
		}
	}
	for name, pod := range n.pods() {
		for _, st := range pod.Status.ContainerStatuses {
			if st.RestartCount != 0 {
				t.Errorf("%s/%s: %d restarts, want 0", name, st.Name, st.RestartCount)
			}
		}
	}
	n.awaitNoLeaks(want)
	if cn != nil {
		n.awaitNetworkOf(cn, want)
	}
}

// awaitNetworkOf waits until network cn holds what the wanted pods' sandboxes hold and
// nothing else: an IP allocation for each pod IP, a veth each, masquerade rules that
// name them only.
func (n *node) awaitNetworkOf(cn *testenv.CNINetwork, want map[string]string) {
	n.t.Helper()
	uids, sandboxed := wantedUIDs(want)
	var wrong []string
	defer func() { // also as a failed Await ends the test
		if len(wrong) > 0 {
			n.t.Logf("the network holds: %q", wrong)
		}
	}()
	testenv.Await(n.t, "the network to hold the wanted pods' addresses and nothing else", 15*time.Second, func() bool {
		ips := map[string]bool{}
		for _, pod := range n.pods() {
			if !pod.Spec.HostNetwork && pod.Status.PodIP != "" {
				ips[pod.Status.PodIP] = true
			}
		}
		wrong = nil
		veths := 0
		for _, leak := range cn.Leaks() {
			ip, isIP := strings.CutPrefix(leak, "IP allocation ")
			switch {
			case isIP && !ips[ip]:
				wrong = append(wrong, leak)
			case strings.HasPrefix(leak, "veth "):
				veths++
			case strings.HasPrefix(leak, "iptables: ") && !ownedBy(leak, uids):
				wrong = append(wrong, leak)
			}
		}
		if len(ips) != sandboxed {
			wrong = append(wrong, fmt.Sprintf("%d pod IPs for %d pods on the pod network", len(ips), sandboxed))
		}
		if veths != len(ips) {
			wrong = append(wrong, fmt.Sprintf("%d veths for %d pod IPs", veths, len(ips)))
		}
		return len(wrong) == 0
	})
}

// churn creates, edits and removes the manifests of a kill -9 scenario and remembers
// what they want.
type churn struct {
	n       *node
	rng     *rand.Rand
	version map[string]int // manifest name -> version written; absent once removed
	changes int            // also the next version: no content is written twice
}

func (c *churn) manifest(name string, version int) string {
	extra := fmt.Sprintf("  # version %d\n", version) // a new version is a new pod
	if strings.HasSuffix(name, "0") || strings.HasSuffix(name, "2") || strings.HasSuffix(name, "4") {
		extra += "  hostNetwork: true\n" // no sandbox
	}
	return strings.Replace(podManifest(name, "Always", "trap 'exit 0' TERM; while true; do sleep 0.1; done", extra),
		"metadata:\n", fmt.Sprintf("metadata:\n  labels: {version: \"%d\"}\n", version), 1)
}

// create writes a manifest of content never written before: a pod removed and made
// again with the same content is the same pod (its UID is the content's hash), whose
// stop, begun when it was removed, is finished and its container restarted.
func (c *churn) create(name string) {
	c.version[name] = c.changes
	c.n.write(name+".yaml", c.manifest(name, c.changes))
	c.changes++
}

// step makes one random change: a pod created, edited or removed.
func (c *churn) step() {
	name := fmt.Sprintf("p%02d", c.rng.IntN(killChurnPods))
	_, ok := c.version[name]
	switch {
	case !ok:
		c.create(name)
		return
	case c.rng.IntN(3) == 0:
		delete(c.version, name)
		if err := os.Remove(filepath.Join(c.n.manifests, name+".yaml")); err != nil {
			c.n.t.Fatal(err)
		}
	default:
		c.version[name] = c.changes
		c.n.write(name+".yaml", c.manifest(name, c.changes))
	}
	c.changes++
}

// wanted returns the pods the manifests want, by static name, with their UIDs.
func (c *churn) wanted() map[string]string {
	out := map[string]string{}
	for name, v := range c.version {
		res := manifests.Load([]byte(c.manifest(name, v)), manifests.Options{
			NodeName: e2eNode, Source: manifests.Source{Kind: manifests.SourceFile, Location: filepath.Join(c.n.manifests, name+".yaml")},
		})
		if len(res.Errors) > 0 || len(res.Pods) != 1 {
			c.n.t.Fatalf("load %s: %v", name, res.Errors)
		}
		out[res.Pods[0].Name] = string(res.Pods[0].UID)
	}
	return out
}

// checkNoTwins lists the node's containers and fails if two of one name run in one pod.
func (c *churn) checkNoTwins() {
	cs := c.n.containers()
	c.checkTwins(cs)
}

func (c *churn) checkTwins(cs map[string]runner.Container) {
	seen := map[string]string{}
	for key, ctr := range cs {
		if ctr.State != runner.StateRunning {
			continue
		}
		k := ctr.PodName + "/" + ctr.Name
		if other, ok := seen[k]; ok {
			c.n.t.Errorf("two containers %s run at once: %s (pod %s) and %s", k, key, ctr.PodUID, other)
		}
		seen[k] = fmt.Sprintf("%s (pod %s)", key, ctr.PodUID)
	}
}

// converged reports whether cs is one running container of each wanted pod, of its
// wanted UID, and nothing else.
func converged(cs map[string]runner.Container, want map[string]string) bool {
	if len(cs) != len(want) {
		return false
	}
	for _, ctr := range cs {
		if want[ctr.PodName] != string(ctr.PodUID) || ctr.State != runner.StateRunning {
			return false
		}
	}
	return true
}

// awaitNoLeaks waits until nothing of a pod that want does not hold is left on the
// node, and fails naming what is when it does not happen within seconds: housekeeping
// removes what a killed staticpod left every 2 s.
func (n *node) awaitNoLeaks(want map[string]string) {
	n.t.Helper()
	uids, sandboxed := wantedUIDs(want)
	var leaks []string
	defer func() {
		if len(leaks) > 0 {
			n.t.Logf("left behind: %q", leaks)
		}
	}()
	await := func(what string, find func() []string) {
		n.t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for leaks = find(); len(leaks) > 0; leaks = find() {
			if time.Now().After(deadline) {
				n.t.Fatalf("%s left behind 15 s after convergence: %q", what, leaks)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	await("containers or sandboxes", func() []string {
		all, err := n.rt.List(n.ctx)
		if err != nil {
			n.t.Fatal(err)
		}
		var out []string
		sandboxes := 0
		for _, c := range all {
			if !uids[string(c.PodUID)] {
				out = append(out, c.ID)
			}
			if c.Kind == runner.KindSandbox {
				sandboxes++
			}
		}
		if sandboxes != sandboxed {
			out = append(out, fmt.Sprintf("%d sandboxes for %d pods that need one", sandboxes, sandboxed))
		}
		return out
	})
	await("pins", func() []string {
		var out []string
		for _, dir := range n.pins() { // named by the sandbox: <pod>_<attempt>_<uid[:8]>
			if !ownedBy(filepath.Base(dir), uids) {
				out = append(out, dir)
			}
		}
		if len(n.pins()) != sandboxed {
			out = append(out, fmt.Sprintf("%d pins for %d sandboxes", len(n.pins()), sandboxed))
		}
		return out
	})
	await("mounts", func() []string {
		return slices.DeleteFunc(mountPoints(n.t, n.dir), func(p string) bool { return ownedBy(p, uids) })
	})
	await("pod directories", func() []string {
		var out []string
		for _, dir := range []string{n.path("root/pods"), n.path("root/run/pods"), n.path("log/pods")} {
			entries := podEntries(dir)
			for _, e := range entries {
				if !uids[e.Name()] && !uids[e.Name()[strings.LastIndexByte(e.Name(), '_')+1:]] {
					out = append(out, filepath.Join(dir, e.Name()))
				}
			}
			if len(entries) != len(uids) {
				out = append(out, fmt.Sprintf("%d entries in %s for %d pods", len(entries), dir, len(uids)))
			}
		}
		return out
	})
	await("snapshots", func() []string {
		ids := map[string]bool{}
		all, err := n.rt.List(n.ctx)
		if err != nil {
			n.t.Fatal(err)
		}
		for _, c := range all {
			ids[c.ID] = true
		}
		var out []string
		err = n.d.Client.SnapshotService("overlayfs").Walk(n.ctx, func(_ context.Context, info snapshots.Info) error {
			if info.Kind == snapshots.KindActive && !ids[info.Name] {
				out = append(out, info.Name)
			}
			return nil
		})
		if err != nil {
			n.t.Fatal(err)
		}
		return out
	})
	shimsFrom, described := time.Now(), false
	await("shims or log writers", func() []string {
		f, err := bench.Measure(0, n.d.Address, n.ns)
		if err != nil {
			n.t.Fatal(err)
		}
		var out []string
		extraShims, extraLoggers := f.Shims.Procs-len(want), f.Loggers.Procs-len(want)
		if (extraShims > 0 || extraLoggers != 0) && time.Since(shimsFrom) > 14*time.Second && !described {
			described = true
			n.describeShims() // about to fail: what is left, and what containerd knows
		}
		if extraShims > 0 {
			out = append(out, fmt.Sprintf("%d shims for %d pods", f.Shims.Procs, len(want)))
		}
		if extraLoggers != 0 {
			out = append(out, fmt.Sprintf("%d log writers for %d containers", f.Loggers.Procs, len(want)))
		}
		return out
	})
}

// wantedUIDs returns the UIDs of the pods of want, and how many of them have a sandbox
// (those not on the host network: see churn.manifest).
func wantedUIDs(want map[string]string) (map[string]bool, int) {
	uids, sandboxed := map[string]bool{}, 0
	for name, uid := range want {
		uids[uid] = true
		if !strings.HasSuffix(name, "0-node1") && !strings.HasSuffix(name, "2-node1") && !strings.HasSuffix(name, "4-node1") {
			sandboxed++
		}
	}
	return uids, sandboxed
}

// ownedBy reports whether path names one of uids, whole or as the 8 characters that
// end a container or sandbox ID.
func ownedBy(path string, uids map[string]bool) bool {
	for uid := range uids {
		if strings.Contains(path, uid) || strings.Contains(path, "_"+uid[:8]) {
			return true
		}
	}
	return false
}

// mountPoints returns the mount points under dir in this process's mount namespace,
// sorted.
func mountPoints(t testing.TB, dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	sort.Strings(out)
	return out
}

// describeShims logs the shims of the node's namespace with their children, and the
// tasks containerd lists.
func (n *node) describeShims() {
	procs, err := bench.Processes()
	if err != nil {
		n.t.Fatal(err)
	}
	shims := bench.Shims(procs, n.d.Address, n.ns)
	for _, p := range procs {
		if shims[p.PID] || shims[p.PPID] {
			n.t.Logf("process %d (parent %d): %q", p.PID, p.PPID, p.Args)
		}
	}
	resp, err := n.d.Client.TaskService().List(n.ctx, &tasks.ListTasksRequest{})
	if err != nil {
		n.t.Fatal(err)
	}
	for _, p := range resp.Tasks {
		n.t.Logf("task %s: pid %d, %v", p.ID, p.Pid, p.Status)
	}
}
