package bench

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sync/errgroup"

	"github.com/staticpod/staticpod/logs"
)

// A replay is the client starting, all at once, the very containers staticpod started:
// their specs (mounts of the pod's files, the pod's cgroup, its shim group), their
// runtime and their log writer, in a floor's namespace of its own. It is a second
// floor: what the containers cost containerd, the shims, runc and the log writers
// however they are asked for, so that a burst's distance to the bare client's splits
// into what staticpod's containers are (the kubelet's layout and files) and what
// staticpod itself does (its daemon, its sandbox records and how it makes the pod's
// namespaces, its calls).
//
// A replayed container gets namespaces of its own where staticpod's joined its pod's
// (network, UTS, IPC), made by runc as for the bare client's containers: a pod's
// namespaces are part of what starting it costs, whoever makes them. Joining the
// running pods' namespaces instead would leave their making out of the floor alone.
//
// shimGroup is the spec annotation that makes the containers of one pod share a shim.
const shimGroup = "io.containerd.runc.v2.group"

// replayed is one container to start again: what staticpod made it from.
type replayed struct {
	id        string
	spec      *oci.Spec
	runtime   string
	options   any
	labels    map[string]string
	log       *url.URL
	logConfig logs.Config
}

// Replay starts again, in the floor's namespace, the running containers of namespace
// ns (not its sandbox records), with their logs under dir, and returns the time from
// the first call to the last task's start event and the CPU time that cost up to
// settle after it. The replayed containers are removed after; ns's are not touched.
func (f *Floor) Replay(ctx context.Context, ns, dir string) (time.Duration, CPUUse, error) {
	plans, err := f.replayPlans(namespaces.WithNamespace(ctx, ns), dir)
	if err != nil {
		return 0, CPUUse{}, err
	}
	ctx = namespaces.WithNamespace(ctx, f.ns)
	defer f.remove(ctx)
	img, err := f.d.Client.GetImage(ctx, Image)
	if err != nil {
		return 0, CPUUse{}, err
	}
	one := func(p replayed) error {
		cont, err := f.d.Client.NewContainer(ctx, p.id, client.WithImage(img), client.WithNewSnapshot(p.id, img),
			client.WithSpec(p.spec), client.WithRuntime(p.runtime, p.options), client.WithContainerLabels(p.labels))
		if err != nil {
			return err
		}
		if err := p.logConfig.Prepare(); err != nil { // as staticpod prepares a log before its task
			return err
		}
		task, err := cont.NewTask(ctx, cio.LogURI(p.log))
		if err != nil {
			return err
		}
		return task.Start(ctx)
	}
	return f.measured(len(plans), func() error {
		var g errgroup.Group
		for _, p := range plans {
			g.Go(func() error { return one(p) })
		}
		return g.Wait()
	})
}

// replayPlans reads the running containers of ctx's namespace into what Replay
// starts, with their logs under dir.
func (f *Floor) replayPlans(ctx context.Context, dir string) ([]replayed, error) {
	cs, err := f.d.Client.Containers(ctx)
	if err != nil {
		return nil, err
	}
	var plans []replayed
	for _, c := range cs {
		got, err := f.d.Client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: c.ID()})
		if err != nil || got.Process.GetStdout() == "" {
			continue // a pinned sandbox's record: it has no task
		}
		info, err := c.Info(ctx)
		if err != nil {
			return nil, err
		}
		spec, err := c.Spec(ctx)
		if err != nil {
			return nil, err
		}
		p := replayed{id: "r-" + c.ID(), spec: spec, runtime: info.Runtime.Name, options: info.Runtime.Options, labels: info.Labels}
		if spec.Linux != nil {
			spec.Linux.CgroupsPath = siblingCgroup(spec.Linux.CgroupsPath, p.id)
			ownNamespaces(spec.Linux.Namespaces)
		}
		if g := spec.Annotations[shimGroup]; g != "" {
			spec.Annotations[shimGroup] = "r-" + g
		}
		if p.log, p.logConfig, err = replayLog(got.Process.Stdout, filepath.Join(dir, p.id+".log")); err != nil {
			return nil, fmt.Errorf("container %s: %w", c.ID(), err)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// ownNamespaces has a container make the network, UTS and IPC namespaces it would join
// (those of a path) anew instead.
func ownNamespaces(nss []specs.LinuxNamespace) {
	for i, ns := range nss {
		switch ns.Type {
		case specs.NetworkNamespace, specs.UTSNamespace, specs.IPCNamespace:
			nss[i].Path = ""
		}
	}
}

// siblingCgroup is the cgroup of container id beside the one of cgroupsPath, in either
// form: a directory (cgroupfs) or slice:prefix:name (systemd).
func siblingCgroup(cgroupsPath, id string) string {
	if i := strings.LastIndex(cgroupsPath, ":"); i >= 0 {
		return cgroupsPath[:i+1] + id
	}
	return path.Join(path.Dir(cgroupsPath), id)
}

// replayLog is staticpod's log URI of a container with its log at path instead, and no
// link to it.
func replayLog(uri, path string) (*url.URL, logs.Config, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, logs.Config{}, err
	}
	q := u.Query()
	lc, err := logs.ParseConfig(q.Get(logs.Command))
	if err != nil {
		return nil, logs.Config{}, err
	}
	lc.Path, lc.Symlink = path, ""
	for k, v := range lc.Query() {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u, lc, nil
}

// sameContainers measures staticpod against the client starting the same containers,
// in the same state of the machine: with a set of pods of staticpod running, staticpod
// starts as many more at once (the set is then removed again), and the client starts
// the running set's containers again at once (Replay). Both bursts find the same pods,
// mounts and processes on the machine, and start the same containers; what is left
// between them is what staticpod does.
func (r *Run) sameContainers(ctx context.Context, n *Node, pods int, hostNet bool, fs floorSet) error {
	var ours, theirs []float64
	ourCPU, theirCPU := cpuSamples{}, cpuSamples{}
	for rep := range r.repeats(3) {
		if _, err := r.startPods(ctx, n, fmt.Sprintf("a%d", rep), pods, hostNet); err != nil {
			return err
		}
		time.Sleep(settle)
		running, err := n.Containers(ctx)
		if err != nil {
			return err
		}
		cpuMark, err := r.meter.Mark(r.d.PID())
		if err != nil {
			return err
		}
		took, err := r.startPods(ctx, n, fmt.Sprintf("b%d", rep), pods, hostNet)
		if err != nil {
			return err
		}
		time.Sleep(settle)
		use, err := r.meter.Since(cpuMark, r.d.PID())
		if err != nil {
			return err
		}
		ours = append(ours, ms(took))
		ourCPU.add(use, pods)
		if err := n.RemovePrefixed(ctx, fmt.Sprintf("b%d-", rep), running); err != nil {
			return err
		}
		took, use, err = r.replay.Replay(ctx, n.Name, filepath.Join(r.opts.Dir, "replay-logs"))
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		theirs = append(theirs, ms(took))
		theirCPU.add(use, pods)
		if err := n.Clear(ctx); err != nil {
			return err
		}
	}
	want := 1.3
	if pods >= 100 {
		want = 1.2
	}
	net := "pod"
	if hostNet {
		net = "host"
	}
	id := fmt.Sprintf("net=%s/pods=%d", net, pods)
	bare := fs[fmt.Sprintf("client/net=%s/n=%d/concurrent=true", net, pods)]
	r.Report.Add(NewRow("same/"+id,
		fmt.Sprintf("%d manifests written → running, %s network, beside %d such pods running", pods, netWord(net), pods), "ms", ours).
		Against("client, the same containers at once", theirs).Want(Target{Ratio: true, Max: want}).
		Noted("the client's burst of the same containers is %.2f× its burst of bare ones", Median(theirs)/Median(bare)))
	med := func(c cpuSamples, part string) float64 { return Median(c[part]) }
	r.Report.Add(NewRow("same-cpu/"+id,
		"the same: CPU time per pod, every process", "ms", ourCPU["all"]).
		Against("client, the same containers at once", theirCPU["replayed"]).Want(Target{Ratio: true, Max: 1.3}).
		Noted("staticpod %.1f, containerd %.1f, shims and runc %.1f, log writers %.1f ms; the client's: client %.1f, containerd %.1f, shims and runc %.1f, log writers %.1f ms",
			med(ourCPU, "daemon"), med(ourCPU, "containerd"), med(ourCPU, "shims"), med(ourCPU, "loggers"),
			med(theirCPU, "client"), med(theirCPU, "containerd"), med(theirCPU, "shims"), med(theirCPU, "loggers")))
	return nil
}

// startPods writes pods manifests named <prefix>-<i> and returns the time from the
// first write to containerd's start event of the last container.
func (r *Run) startPods(ctx context.Context, n *Node, prefix string, pods int, hostNet bool) (time.Duration, error) {
	mark := r.events.Mark()
	start := time.Now()
	for i := range pods {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if err := n.Write(name+".yaml", Pod(name, Stopper, hostNet)); err != nil {
			return 0, err
		}
	}
	started, err := r.events.Await(mark, pods, 3*time.Minute, In(n.Name, "/tasks/start"))
	if err != nil {
		return 0, err
	}
	return Last(started).Sub(start), nil
}
