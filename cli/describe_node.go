package cli

import (
	"fmt"
	"io"
	"os/signal"
	"sort"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticpod/staticpod/manifests"
)

// runDescribeNode is `describe node`: the node the daemon admits pods on, as kubectl
// describes a node, with the pods it runs and what they request of it.
func runDescribeNode(c *cli.Context) error {
	api, err := newClient(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	n, err := api.Node(ctx)
	if err != nil {
		return exitError("describe", err)
	}
	pods, err := api.Pods(ctx)
	if err != nil {
		return exitError("describe", err)
	}
	return exitError("describe", describeNode(c.App.Writer, n, pods.Items, time.Now()))
}

// describeNode prints n as kubectl describe node does: labels, taints, conditions,
// capacity, allocatable, system info, the pods not terminated and what they request.
func describeNode(out io.Writer, n *corev1.Node, pods []corev1.Pod, now time.Time) error {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	p := prefixWriter{tw}
	p.write(0, "Name:\t%s\n", n.Name)
	p.list(0, "Labels", keyValues(n.Labels, "="))
	taints := make([]string, 0, len(n.Spec.Taints))
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.ToString())
	}
	p.list(0, "Taints", taints)
	p.write(0, "Conditions:\n")
	p.write(1, "Type\tStatus\tLastHeartbeatTime\tReason\tMessage\n")
	p.write(1, "----\t------\t-----------------\t------\t-------\n")
	for _, c := range n.Status.Conditions {
		p.write(1, "%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.LastHeartbeatTime.Format(describeTime), c.Reason, c.Message)
	}
	for _, l := range []struct {
		title string
		list  corev1.ResourceList
	}{{"Capacity", n.Status.Capacity}, {"Allocatable", n.Status.Allocatable}} {
		p.write(0, "%s:\n", l.title)
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := l.list[name]; ok {
				p.write(1, "%s:\t%s\n", name, q.String())
			}
		}
	}
	info := n.Status.NodeInfo
	p.write(0, "System Info:\n")
	p.write(1, "Kernel Version:\t%s\n", info.KernelVersion)
	p.write(1, "Operating System:\t%s\n", info.OperatingSystem)
	p.write(1, "Architecture:\t%s\n", info.Architecture)
	describeNodePods(p, n, pods, now)
	return tw.Flush()
}

// describeNodePods prints the pods that are not terminated (refused pods are Failed)
// with their requests, and their sum against the node's allocatable.
func describeNodePods(p prefixWriter, n *corev1.Node, pods []corev1.Pod, now time.Time) {
	var active []corev1.Pod
	for _, pod := range pods {
		if pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
			active = append(active, pod)
		}
	}
	sort.Slice(active, func(i, j int) bool { return manifests.Key(&active[i]) < manifests.Key(&active[j]) })
	p.write(0, "Non-terminated Pods: (%d in total)\n", len(active))
	p.write(1, "Namespace\tName\tCPU Requests\tMemory Requests\tAge\n")
	p.write(1, "---------\t----\t------------\t---------------\t---\n")
	total := corev1.ResourceList{corev1.ResourceCPU: resource.Quantity{}, corev1.ResourceMemory: resource.Quantity{}}
	for i := range active {
		pod := &active[i]
		req := manifests.PodRequests(pod)
		p.write(1, "%s\t%s\t%s\t%s\t%s\n", pod.Namespace, pod.Name, req.Cpu(), req.Memory(), since(podCreated(pod), now))
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := req[name]; ok {
				sum := total[name]
				sum.Add(q)
				total[name] = sum
			}
		}
	}
	p.write(0, "Allocated resources:\n")
	p.write(1, "Resource\tRequests\n")
	p.write(1, "--------\t--------\n")
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		sum, alloc := total[name], n.Status.Allocatable[name]
		p.write(1, "%s\t%s (%s)\n", name, sum.String(), percentOf(sum, alloc))
	}
}

// percentOf is q as a percentage of of, as kubectl prints it.
func percentOf(q, of resource.Quantity) string {
	if of.IsZero() {
		return "0%"
	}
	return fmt.Sprintf("%d%%", int64(q.AsApproximateFloat64()/of.AsApproximateFloat64()*100))
}
