package once

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/runner/events"
)

// progress tells on stderr what the run does. On a terminal: every event (containers
// created, started, stopped, probes failing), pods finishing, and the pods once still
// waits for. Elsewhere only warnings and the reason of a pod that staticpod failed
// (DeadlineExceeded), which a CI log needs to explain a failure.
type progress struct {
	w        io.Writer
	terminal bool
	start    time.Time
	told     map[types.UID]string // what was said last of each pod
}

func (p *progress) event(e events.Record) {
	if e.Type != events.Warning && !p.terminal {
		return
	}
	who := e.Pod
	if ns, name, ok := strings.Cut(e.Pod, "/"); ok {
		who = spcli.DisplayName(ns, name)
	}
	if e.Container != "" {
		who += "/" + e.Container
	}
	kind := ""
	if e.Type == events.Warning {
		kind = "warning: "
	}
	fmt.Fprintf(p.w, "%s%s%s: %s\n", p.stamp(), kind, who, e.Message)
}

// pods says which pods finished, became ready or are waited for, and reports whether
// every pod is done.
func (p *progress) pods(want, got []*corev1.Pod) bool {
	all, jobs := true, true
	for i := range want {
		if !done(want[i], got[i]) {
			all = false
			jobs = jobs && want[i].Spec.RestartPolicy == corev1.RestartPolicyAlways
		}
	}
	for i, pod := range got {
		var say string
		switch {
		case pod == nil:
			continue
		case pod.Status.Phase == corev1.PodFailed && pod.Status.Reason != "":
			say = fmt.Sprintf("%s: %s: %s", pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
		case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
			say = string(pod.Status.Phase)
		case done(want[i], pod):
			say = "Ready"
		case jobs:
			say = "waiting until it is Ready"
			if msg := conditionMessage(pod, corev1.PodReady); msg != "" {
				say += " (" + msg + ")"
			}
		}
		if say != "" && p.told[pod.UID] != say {
			p.told[pod.UID] = say
			if p.terminal || pod.Status.Phase == corev1.PodFailed && pod.Status.Reason != "" {
				fmt.Fprintf(p.w, "%s%s: %s\n", p.stamp(), spcli.DisplayName(pod.Namespace, pod.Name), say)
			}
		}
	}
	return all
}

func (p *progress) stamp() string {
	return fmt.Sprintf("[%5.1fs] ", time.Since(p.start).Seconds())
}

func conditionMessage(pod *corev1.Pod, t corev1.PodConditionType) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Message
		}
	}
	return ""
}

// printSummary prints the outcome of every container: POD CONTAINER STATE EXIT
// RESTARTS, init containers first.
func printSummary(w io.Writer, want, got []*corev1.Pod) {
	rows := [][]string{{"POD", "CONTAINER", "STATE", "EXIT", "RESTARTS"}}
	for i, spec := range want {
		pod := got[i]
		if pod == nil {
			for _, c := range slices.Concat(spec.Spec.InitContainers, spec.Spec.Containers) {
				rows = append(rows, []string{spcli.DisplayName(spec.Namespace, spec.Name), c.Name, "NotStarted", "-", "0"})
			}
			continue
		}
		name := spcli.DisplayName(pod.Namespace, pod.Name)
		for _, cs := range pod.Status.InitContainerStatuses {
			rows = append(rows, summaryRow(name, cs.Name+" (init)", cs))
		}
		for _, cs := range pod.Status.ContainerStatuses {
			rows = append(rows, summaryRow(name, cs.Name, cs))
		}
	}
	spcli.NewTable(w).Print(rows...)
}

func summaryRow(pod, container string, cs corev1.ContainerStatus) []string {
	state, exit := "Waiting", "-"
	switch {
	case cs.State.Running != nil:
		state = "Running"
	case cs.State.Terminated != nil:
		state, exit = spcli.TerminatedReason(cs.State.Terminated), strconv.Itoa(int(cs.State.Terminated.ExitCode))
	case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
		state = cs.State.Waiting.Reason
	}
	if t := cs.LastTerminationState.Terminated; exit == "-" && t != nil {
		exit = strconv.Itoa(int(t.ExitCode))
	}
	return []string{pod, container, state, exit, strconv.Itoa(int(cs.RestartCount))}
}
