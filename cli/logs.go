package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/client"
)

// Logs is the logs command: a container's log, read through the daemon.
func Logs() *cli.Command {
	return &cli.Command{
		Name:         "logs",
		BashComplete: completePods(false),
		Usage:        "print a container's logs",
		ArgsUsage:    "POD",
		Description: "POD is the pod's full static name (web-node1) or namespace/name. -c may be left out when\n" +
			"the pod has one container. Flags may follow POD, as with kubectl.",
		Flags: append(clientFlags(),
			containerFlag(),
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new lines, across rotations, until interrupted"},
			&cli.BoolFlag{Name: "previous", Aliases: []string{"p"}, Usage: "print the logs of the container's previous run"},
			&cli.IntFlag{Name: "tail", Value: -1, Usage: "print only the last `N` lines (-1: all)"},
			&cli.BoolFlag{Name: "timestamps", Usage: "prefix each line with its time (RFC3339 with nanoseconds)"},
		),
		Action: runLogs,
	}
}

func runLogs(c *cli.Context) error {
	req, err := lookupPod(c, "logs")
	if err != nil {
		return err
	}
	defer req.stop()
	container, err := pickContainer(req.pod, c.String("container"))
	if err != nil {
		return err
	}
	stream, err := req.api.Logs(req.ctx, req.ref.Namespace, req.ref.Name, container, logOptions(c))
	if err != nil {
		return exitError("logs", err)
	}
	defer stream.Close()
	_, err = io.Copy(c.App.Writer, stream)
	if req.ctx.Err() != nil || errors.Is(err, io.ErrUnexpectedEOF) && c.Bool("follow") {
		return nil // interrupted, or the daemon went away while following
	}
	return exitError("logs", err)
}

// logOptions are the command's flags as the API client takes them.
func logOptions(c *cli.Context) client.LogOptions {
	opts := client.LogOptions{Follow: c.Bool("follow"), Previous: c.Bool("previous"), Timestamps: c.Bool("timestamps")}
	if n := c.Int("tail"); n >= 0 {
		opts.TailLines = &n
	}
	return opts
}

// pickContainer returns the container named, checked against the pod, or the
// pod's only app container when name is empty.
func pickContainer(pod *corev1.Pod, name string) (string, error) {
	if name != "" {
		for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
			if c.Name == name {
				return name, nil
			}
		}
		return "", cli.Exit(fmt.Sprintf("pod %s has no container %q; %s", DisplayName(pod.Namespace, pod.Name), name, listContainers(pod)), ExitUsage)
	}
	if len(pod.Spec.Containers) == 1 {
		return pod.Spec.Containers[0].Name, nil
	}
	return "", cli.Exit(fmt.Sprintf("pod %s has %d containers: choose one with -c; %s", DisplayName(pod.Namespace, pod.Name), len(pod.Spec.Containers), listContainers(pod)), ExitUsage)
}

// listContainers names a pod's containers, for errors: "its containers: a, b (init: c)".
func listContainers(pod *corev1.Pod) string {
	var apps, inits []string
	for _, c := range pod.Spec.Containers {
		apps = append(apps, c.Name)
	}
	for _, c := range pod.Spec.InitContainers {
		inits = append(inits, c.Name)
	}
	out := "its containers: " + strings.Join(apps, ", ")
	if len(inits) > 0 {
		out += " (init: " + strings.Join(inits, ", ") + ")"
	}
	return out
}
