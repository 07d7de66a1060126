package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/manifests"
)

// Table prints rows in columns as kubectl does: three spaces apart, six wide at
// least. The widths it found are kept for later rows, so that a watch stays aligned.
type Table struct {
	w      io.Writer
	widths []int
}

// NewTable returns a table that prints to w.
func NewTable(w io.Writer) *Table { return &Table{w: w} }

// Print writes rows, widening the columns where a cell needs it.
func (t *Table) Print(rows ...[]string) error {
	for _, r := range rows {
		for i, cell := range r {
			if i == len(t.widths) {
				t.widths = append(t.widths, 0)
			}
			t.widths[i] = max(t.widths[i], utf8.RuneCountInString(cell)+3, 6)
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, cell := range r {
			b.WriteString(cell)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(cell)))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}

// podColumns are the columns of ps; wide adds the rest.
var (
	podColumns  = []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}
	wideColumns = []string{"IP", "NODE", "SOURCE"}
)

func podHeader(wide bool) []string {
	if wide {
		return append(append([]string{}, podColumns...), wideColumns...)
	}
	return podColumns
}

// podRow is a pod's line in ps, as kubectl get pods prints it. NAME is what the other
// commands take as POD: the name, or namespace/name outside the default namespace.
// STATUS ends in "(rolled back)" when the pod runs its last Ready revision instead of
// the one its source asks for.
func podRow(pod *corev1.Pod, now time.Time, wide bool) []string {
	s := summarize(pod)
	if pod.Annotations[manifests.AnnotationRolledBackFrom] != "" {
		s.reason += " (rolled back)"
	}
	restarts := strconv.Itoa(s.restarts)
	if s.restarts != 0 && !s.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.restarts, since(s.lastRestart, now))
	}
	row := []string{
		DisplayName(pod.Namespace, pod.Name),
		fmt.Sprintf("%d/%d", s.ready, s.total),
		s.reason,
		restarts,
		since(podCreated(pod), now),
	}
	if wide {
		row[2] = pullingReason(pod, s.reason)
		row = append(row, orNone(podIP(pod)), orNone(pod.Spec.NodeName), orNone(podSource(pod)))
	}
	return row
}

// pullingReason is STATUS in ps -o wide: reason, with ContainerCreating told as the
// progress of the pull a container waits for ("Pulling 12.3MB/45.6MB"), if one does.
func pullingReason(pod *corev1.Pod, reason string) string {
	prefix, ok := strings.CutSuffix(reason, "ContainerCreating")
	if !ok {
		return reason
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && w.Reason == "ContainerCreating" {
			if bytes, ok := wire.PullingBytes(w.Message); ok {
				return strings.TrimSpace(prefix + "Pulling " + bytes)
			}
		}
	}
	return reason
}

// printPods prints the pods as a ps table.
func printPods(w io.Writer, pods []corev1.Pod, wide bool, now time.Time) error {
	rows := [][]string{podHeader(wide)}
	for i := range pods {
		rows = append(rows, podRow(&pods[i], now, wide))
	}
	return NewTable(w).Print(rows...)
}

// printPodList prints the list as JSON (indented as kubectl does) or YAML, with the
// type meta filled in where the daemon left it out.
func printPodList(w io.Writer, list *corev1.PodList, format string) error {
	if list.Kind == "" {
		list.APIVersion, list.Kind = "v1", "PodList"
	}
	for i := range list.Items {
		if list.Items[i].Kind == "" {
			list.Items[i].APIVersion, list.Items[i].Kind = "v1", "Pod"
		}
	}
	var out []byte
	var err error
	if format == "json" {
		out, err = json.MarshalIndent(list, "", "    ")
		out = append(out, '\n')
	} else {
		out, err = yaml.Marshal(list)
	}
	if err != nil {
		return fmt.Errorf("encode pods: %w", err)
	}
	_, err = w.Write(out)
	return err
}

// podSummary is what ps shows of a pod's containers.
type podSummary struct {
	ready, total int
	reason       string
	restarts     int
	lastRestart  time.Time
}

// summarize follows kubectl's printPod: STATUS is the phase, unless an init container
// has not completed (Init:…), or an app container waits or has terminated (its
// reason, or ExitCode:N), with Completed turned back into Running while a container
// still runs. Restarts of init containers count while the pod initializes; once it
// has, only those of sidecars (restartable init containers) and app containers do.
func summarize(pod *corev1.Pod) podSummary {
	s := podSummary{total: len(pod.Spec.Containers), reason: string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		s.reason = pod.Status.Reason
	}
	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if manifests.IsSidecar(&c) {
			sidecars[c.Name] = true
			s.total++
		}
	}
	initializing := summarizeInit(pod, sidecars, &s)
	if !initializing || manifests.ConditionTrue(pod.Status, corev1.PodInitialized) {
		summarizeApps(pod, sidecars, &s)
	}
	if pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		s.reason = "Terminating"
	}
	return s
}

// summarizeInit looks at the init containers in order and reports whether the pod is
// still initializing: an init container that failed, waits, or has not completed.
func summarizeInit(pod *corev1.Pod, sidecars map[string]bool, s *podSummary) bool {
	for i, cs := range pod.Status.InitContainerStatuses {
		s.restarts += int(cs.RestartCount)
		s.noteRestart(cs)
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case sidecars[cs.Name] && cs.Started != nil && *cs.Started:
			if cs.Ready {
				s.ready++
			}
			continue
		case cs.State.Terminated != nil:
			s.reason = "Init:" + TerminatedReason(cs.State.Terminated)
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			s.reason = "Init:" + cs.State.Waiting.Reason
		default:
			s.reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		return true
	}
	return false
}

// summarizeApps looks at the app containers, the last one first so that the first
// one's reason wins, and counts the ready ones.
func summarizeApps(pod *corev1.Pod, sidecars map[string]bool, s *podSummary) {
	s.restarts, s.lastRestart = 0, time.Time{}
	for _, cs := range pod.Status.InitContainerStatuses {
		if sidecars[cs.Name] {
			s.restarts += int(cs.RestartCount)
			s.noteRestart(cs)
		}
	}
	running := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		cs := pod.Status.ContainerStatuses[i]
		s.restarts += int(cs.RestartCount)
		s.noteRestart(cs)
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			s.reason = cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			s.reason = TerminatedReason(cs.State.Terminated)
		case cs.Ready && cs.State.Running != nil:
			running = true
			s.ready++
		}
	}
	if s.reason == "Completed" && running {
		s.reason = "NotReady"
		if manifests.ConditionTrue(pod.Status, corev1.PodReady) {
			s.reason = "Running"
		}
	}
}

// noteRestart keeps the newest end of a previous run, for "(5m ago)".
func (s *podSummary) noteRestart(cs corev1.ContainerStatus) {
	if t := cs.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(s.lastRestart) {
		s.lastRestart = t.FinishedAt.Time
	}
}

// TerminatedReason is a terminated container's reason, or its exit code or signal.
func TerminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	}
	return fmt.Sprintf("ExitCode:%d", t.ExitCode)
}

// podCreated is when the pod came to be: its creation timestamp when it has one (a
// static pod has none), else when staticpod first saw it (config.seen), else when its
// worker started it.
func podCreated(pod *corev1.Pod) time.Time {
	if !pod.CreationTimestamp.IsZero() {
		return pod.CreationTimestamp.Time
	}
	if seen, err := time.Parse(time.RFC3339Nano, pod.Annotations[manifests.AnnotationSeen]); err == nil {
		return seen
	}
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return time.Time{}
}

// since is the age of t as kubectl prints it (5m10s, 3h, 2d), or <unknown>.
func since(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func podIP(pod *corev1.Pod) string {
	if len(pod.Status.PodIPs) > 0 {
		return pod.Status.PodIPs[0].IP
	}
	return pod.Status.PodIP
}

// podSource is where the pod's manifest comes from: file:<path>, url:<URL> or
// api:<pushed name>.
func podSource(pod *corev1.Pod) string {
	kind := pod.Annotations[manifests.AnnotationSource]
	if kind == "" {
		return ""
	}
	if kind == manifests.SourceHTTP {
		kind = "url"
	}
	if loc := pod.Annotations[manifests.AnnotationLocation]; loc != "" {
		return kind + ":" + loc
	}
	return kind
}

// DisplayName is how a pod is shown, and typed back: its name in the default namespace,
// namespace/name elsewhere.
func DisplayName(namespace, name string) string {
	if namespace == metav1.NamespaceDefault || namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// describeEvents prints the pod's events as kubectl describe does, oldest first,
// repeats folded: "5s (x3 over 2m)".
func describeEvents(p prefixWriter, events []wire.Event, err error, now time.Time) {
	switch {
	case err != nil:
		p.write(0, "Events:\t<cannot read: %v>\n", err)
		return
	case len(events) == 0:
		p.write(0, "Events:\t<none>\n")
		return
	}
	sorted := append([]wire.Event(nil), events...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Last.Before(sorted[j].Last) })
	p.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
	p.write(1, "----\t------\t----\t----\t-------\n")
	for _, e := range sorted {
		age := since(e.First, now)
		if e.Count > 1 {
			age = fmt.Sprintf("%s (x%d over %s)", since(e.Last, now), e.Count, age)
		}
		p.write(1, "%s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, eventSource, strings.TrimSpace(e.Message))
	}
}

// eventSource is the From of every event: staticpod reported it, as the kubelet is the
// From of a node's pod events.
const eventSource = "staticpod"

// keyValues is "key<sep>value" for each entry of m, sorted by key.
func keyValues(m map[string]string, sep string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+sep+v)
	}
	sort.Strings(out)
	return out
}

// tolerations prints each toleration as kubectl does: key=value:Effect op=Exists for 30s.
func tolerations(ts []corev1.Toleration) []string {
	var out []string
	for _, t := range ts {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		if t.Effect != "" {
			s += ":" + string(t.Effect)
		}
		if t.Operator == corev1.TolerationOpExists && t.Value == "" {
			if s != "" {
				s += " "
			}
			s += "op=Exists"
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
		}
		out = append(out, s)
	}
	return out
}

func printBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// Count is n and the noun, plural unless n is 1: "1 file", "3 errors".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
