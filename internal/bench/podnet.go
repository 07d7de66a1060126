package bench

import (
	"context"
	"fmt"
	"path/filepath"
)

// podNetwork measures 20 manifests written at once → running on the default pod
// network (--cni-default-bridge, as `make run` starts it: the bridge plugin with
// host-local, staticpod's masquerade), against the same burst on a node without a pod
// network (each pod its own network namespace, loopback only). The two alternate, on
// nodes of their own, so that both see the same machine: the ratio is what the pod
// network adds to a burst. The containerd client has no pod network to set up, so
// there is no client floor here.
func (r *Run) podNetwork(ctx context.Context) error {
	const pods = 20
	cni, err := r.node(ctx, "cni", "--cni-conf-dir", filepath.Join(r.opts.Dir, "cni", "net.d"), "--cni-default-bridge")
	if err != nil {
		return err
	}
	none, err := r.node(ctx, "nocni")
	if err != nil {
		return err
	}
	for _, n := range []*Node{cni, none} {
		if err := n.Start(); err != nil {
			return err
		}
		defer n.Stop()
		if err := r.meter.Enter(cpuDaemon, n.PID()); err != nil {
			return err
		}
	}
	took := map[*Node][]float64{}
	cpu := map[*Node]cpuSamples{cni: {}, none: {}}
	for rep := range r.repeats(3) {
		for _, n := range []*Node{cni, none} {
			b, err := r.burst(ctx, n, fmt.Sprintf("n%d", rep), pods, false, "")
			if err != nil {
				return fmt.Errorf("%s: %w (staticpod's log:\n%s)", n.Name, err, n.LogTail())
			}
			took[n] = append(took[n], ms(b.took))
			cpu[n].add(b.cpu, pods)
		}
	}
	med := func(n *Node, part string) float64 { return Median(cpu[n][part]) }
	r.Report.Add(NewRow(fmt.Sprintf("start/net=cni/pods=%d", pods),
		fmt.Sprintf("%d manifests written → running, pod network (the default bridge)", pods), "ms", took[cni]).
		Against("the same without a pod network", took[none]))
	r.Report.Add(NewRow(fmt.Sprintf("cpu/net=cni/pods=%d", pods), "the same: CPU time per pod, every process", "ms", cpu[cni]["all"]).
		Against("the same without a pod network", cpu[none]["all"]).
		Noted("staticpod and the plugins it runs %.1f, containerd %.1f, shims and runc %.1f, log writers %.1f ms; without: staticpod %.1f, containerd %.1f, shims and runc %.1f, log writers %.1f ms",
			med(cni, "daemon"), med(cni, "containerd"), med(cni, "shims"), med(cni, "loggers"),
			med(none, "daemon"), med(none, "containerd"), med(none, "shims"), med(none, "loggers")))
	return nil
}
