package cli

import (
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Top is the top command: what each pod (or container) uses, as kubectl top pod prints
// it from the daemon's /stats/summary.
func Top() *cli.Command {
	return &cli.Command{
		Name:         "top",
		BashComplete: completePods(true),
		Usage:        "show the CPU and memory each pod uses, as kubectl top pod does",
		ArgsUsage:    "[POD...]",
		Description: "NAME CPU(cores) MEMORY(bytes): CPU is the rate since the sample before in millicores\n" +
			"(samples are 10 s apart while the figures are read, a minute apart while they are not), memory\n" +
			"the working set (usage less inactive file pages, what the kubelet evicts on) in MiB, both read\n" +
			"from the pods' cgroups. A pod started since the sample before has no CPU rate yet.",
		Flags: append(clientFlags(),
			&cli.BoolFlag{Name: "containers", Usage: "a line per container, with its POD"},
			&cli.StringFlag{Name: "sort-by", Usage: "cpu or memory: the largest first"},
			&cli.BoolFlag{Name: "no-headers", Usage: "print no header line"},
		),
		Action: runTop,
	}
}

// usageRow is one line of top: a pod's or a container's CPU in nanocores and working set.
type usageRow struct {
	pod, container string
	nanoCores      uint64
	workingSet     uint64
	hasCPU         bool
}

func runTop(c *cli.Context) error {
	sortBy := c.String("sort-by")
	if sortBy != "" && sortBy != "cpu" && sortBy != "memory" {
		return cli.Exit(fmt.Sprintf("--sort-by %q: use cpu or memory", sortBy), ExitUsage)
	}
	var want []podRef
	for _, arg := range c.Args().Slice() {
		ref, err := parsePodRef(arg)
		if err != nil {
			return err
		}
		want = append(want, ref)
	}
	api, err := newClient(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sum, err := api.Summary(ctx)
	if err != nil {
		return exitError("top", err)
	}
	pods := sum.Pods
	if len(want) > 0 {
		pods = nil
		for _, ref := range want {
			i := slices.IndexFunc(sum.Pods, func(p statsapi.PodStats) bool {
				return p.PodRef.Namespace == ref.Namespace && p.PodRef.Name == ref.Name
			})
			if i < 0 {
				return cli.Exit(fmt.Sprintf("top: metrics not available for pod %s: it is not running, or was not sampled yet (every 10 s)", ref), ExitInvalid)
			}
			pods = append(pods, sum.Pods[i])
		}
	}
	if len(pods) == 0 {
		fmt.Fprintln(c.App.ErrWriter, "No resources found.")
		return nil
	}
	rows := topRows(pods, c.Bool("containers"))
	sortRows(rows, sortBy)
	return exitError("top", printTop(c.App.Writer, rows, c.Bool("containers"), !c.Bool("no-headers")))
}

// topRows are the summary's pods, or their containers, in the summary's order.
func topRows(pods []statsapi.PodStats, containers bool) []usageRow {
	var rows []usageRow
	for _, p := range pods {
		name := DisplayName(p.PodRef.Namespace, p.PodRef.Name)
		if !containers {
			rows = append(rows, newUsageRow(name, "", p.CPU, p.Memory))
			continue
		}
		for _, ct := range p.Containers {
			rows = append(rows, newUsageRow(name, ct.Name, ct.CPU, ct.Memory))
		}
	}
	return rows
}

func newUsageRow(pod, container string, cpu *statsapi.CPUStats, mem *statsapi.MemoryStats) usageRow {
	r := usageRow{pod: pod, container: container}
	if cpu != nil && cpu.UsageNanoCores != nil {
		r.nanoCores, r.hasCPU = *cpu.UsageNanoCores, true
	}
	if mem != nil && mem.WorkingSetBytes != nil {
		r.workingSet = *mem.WorkingSetBytes
	}
	return r
}

// sortRows sorts by name, then by CPU or memory, the largest first as kubectl does.
func sortRows(rows []usageRow, by string) {
	slices.SortFunc(rows, func(a, b usageRow) int {
		if c := strings.Compare(a.pod, b.pod); c != 0 {
			return c
		}
		return strings.Compare(a.container, b.container)
	})
	slices.SortStableFunc(rows, func(a, b usageRow) int {
		switch by {
		case "cpu":
			return -cmpUint(a.nanoCores, b.nanoCores)
		case "memory":
			return -cmpUint(a.workingSet, b.workingSet)
		}
		return 0
	})
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// printTop prints the rows as kubectl top pod does: CPU in millicores (3m), memory in
// MiB (17Mi), both rounded down.
func printTop(w io.Writer, rows []usageRow, containers, headers bool) error {
	var table [][]string
	if headers {
		if containers {
			table = append(table, []string{"POD", "NAME", "CPU(cores)", "MEMORY(bytes)"})
		} else {
			table = append(table, []string{"NAME", "CPU(cores)", "MEMORY(bytes)"})
		}
	}
	for _, r := range rows {
		cpu, mem := r.cpu(), r.memory()
		if containers {
			table = append(table, []string{r.pod, r.container, cpu, mem})
		} else {
			table = append(table, []string{r.pod, cpu, mem})
		}
	}
	return NewTable(w).Print(table...)
}

// podUsage is the pod's entry in the summary, nil when it has none.
func podUsage(sum *statsapi.Summary, pod *corev1.Pod) *statsapi.PodStats {
	for i, p := range sum.Pods {
		if p.PodRef.Namespace == pod.Namespace && p.PodRef.Name == pod.Name && p.PodRef.UID == string(pod.UID) {
			return &sum.Pods[i]
		}
	}
	return nil
}

// describeUsage writes what the pod and each container use, as top prints it, with the
// age of the sample: "Usage: cpu 3m, memory 17Mi (12s ago)".
func describeUsage(p prefixWriter, usage *statsapi.PodStats, now time.Time) {
	if usage == nil {
		return
	}
	line := func(cpu *statsapi.CPUStats, mem *statsapi.MemoryStats) string {
		r := newUsageRow("", "", cpu, mem)
		s := fmt.Sprintf("cpu %s, memory %s", r.cpu(), r.memory())
		if mem != nil {
			s += " (" + since(mem.Time.Time, now) + " ago)"
		}
		return s
	}
	p.write(0, "Usage:\t%s\n", line(usage.CPU, usage.Memory))
	for _, c := range usage.Containers {
		p.write(1, "%s:\t%s\n", c.Name, line(c.CPU, c.Memory))
	}
}

// cpu is the row's CPU rate in millicores, as kubectl top prints it: 3m.
func (r usageRow) cpu() string {
	if !r.hasCPU {
		return "<unknown>"
	}
	return fmt.Sprintf("%dm", r.nanoCores/1e6)
}

// memory is the row's working set in MiB, as kubectl top prints it: 17Mi.
func (r usageRow) memory() string { return fmt.Sprintf("%dMi", r.workingSet>>20) }
