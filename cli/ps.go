package cli

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/client"
)

// watchPeriod is how often ps -w lists the pods again.
const watchPeriod = time.Second

// PS is the ps command: the pods and their status, as kubectl get pods prints them.
func PS() *cli.Command {
	return &cli.Command{
		Name:  "ps",
		Usage: "list the pods and their status",
		Description: "NAME READY STATUS RESTARTS AGE, as kubectl get pods prints them. NAME is what logs,\n" +
			"describe and exec take: the pod's name, or namespace/name outside the default namespace.",
		Flags: append(clientFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "wide (adds IP, NODE, SOURCE), json or yaml (the v1.PodList)"},
			&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "after the list, print each pod again whenever it changes"},
		),
		Action: runPS,
	}
}

func runPS(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("ps takes no arguments, got %q (see 'staticpod ps --help')", c.Args().First()), ExitUsage)
	}
	format := c.String("output")
	switch format {
	case "", "wide":
	case "json", "yaml":
		if c.Bool("watch") {
			return cli.Exit("-w prints tables only: use it without -o json|yaml", ExitUsage)
		}
	default:
		return cli.Exit(fmt.Sprintf("-o %q: use wide, json or yaml", format), ExitUsage)
	}
	api, err := newClient(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	list, err := api.Pods(ctx)
	if err != nil {
		return exitError("ps", err)
	}
	switch {
	case format == "json" || format == "yaml":
		err = printPodList(c.App.Writer, list, format)
	case c.Bool("watch"):
		err = watchPods(ctx, api, c.App.Writer, list, format == "wide")
	case len(list.Items) == 0:
		fmt.Fprintln(c.App.ErrWriter, "No pods found.")
	default:
		err = printPods(c.App.Writer, list.Items, format == "wide", time.Now())
	}
	return exitError("ps", err)
}

// watchPods prints the list, then lists the pods every watchPeriod and prints the
// pods that changed (readiness, status, restarts), new pods, and pods that went
// away, until ctx is done.
func watchPods(ctx context.Context, api *client.Client, w io.Writer, list *corev1.PodList, wide bool) error {
	t := NewTable(w)
	rows := [][]string{podHeader(wide)}
	shown := map[string][]string{} // by display name: the row printed last
	tick := time.NewTicker(watchPeriod)
	defer tick.Stop()
	for {
		now := time.Now()
		seen := map[string]bool{}
		for i := range list.Items {
			row := podRow(&list.Items[i], now, wide)
			seen[row[0]] = true
			if prev, ok := shown[row[0]]; !ok || changed(prev, row) {
				rows = append(rows, row)
				shown[row[0]] = row
			}
		}
		for name, row := range shown {
			if !seen[name] {
				gone := append([]string{}, row...)
				gone[2] = "Deleted"
				rows = append(rows, gone)
				delete(shown, name)
			}
		}
		if err := t.Print(rows...); err != nil {
			return err
		}
		rows = nil
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		var err error
		if list, err = api.Pods(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// changed reports whether a pod's row says something new: its readiness, status or
// restart count (not its age, nor how long ago it restarted).
func changed(prev, row []string) bool {
	restarts := func(r []string) string { n, _, _ := strings.Cut(r[3], " "); return n }
	if prev[1] != row[1] || prev[2] != row[2] || restarts(prev) != restarts(row) {
		return true
	}
	for i := 5; i < len(row); i++ { // wide: IP, NODE, SOURCE
		if prev[i] != row[i] {
			return true
		}
	}
	return false
}
