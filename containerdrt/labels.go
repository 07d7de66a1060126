package containerdrt

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/staticpod/staticpod/containerdrt/podnet"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// Labels every staticpod container and sandbox carries in containerd, so that the whole
// picture can be rebuilt from containerd alone after staticpod restarts.
const (
	labelPrefix       = "io.staticpod."
	LabelKind         = labelPrefix + "kind"                     // sandbox | container
	LabelPodUID       = labelPrefix + "pod.uid"                  // the pod's UID
	LabelPodName      = labelPrefix + "pod.name"                 // the pod's (static) name
	LabelPodNamespace = labelPrefix + "pod.namespace"            // the pod's namespace
	LabelContainer    = labelPrefix + "container"                // the container's name
	LabelAttempt      = labelPrefix + "attempt"                  // restart count of this container
	LabelHash         = labelPrefix + "hash"                     // manifests.ContainerHash of its spec; on a sandbox, manifests.SandboxHash of its pod
	LabelSource       = labelPrefix + "source"                   // the manifest source: file, http, api
	LabelPodLocation  = labelPrefix + "pod.location"             // the pod's file, URL or pushed name (see podLabels)
	LabelStopSignal   = labelPrefix + "stop-signal"              // the image's StopSignal, or empty
	LabelLogPath      = labelPrefix + "log-path"                 // its CRI log file
	LabelTermination  = labelPrefix + "termination-message-path" // host path of the termination log
	LabelTermPolicy   = labelPrefix + "termination-message-policy"
	// What stopping a container needs once its pod's spec is gone (see runner.Container).
	LabelPodGrace = labelPrefix + "pod.termination-grace-period" // seconds
	LabelPreStop  = labelPrefix + "container.prestop"            // JSON: name, ports, lifecycle.preStop
	// LabelPodStartTime is the pod's status.startTime when it was made (RFC 3339),
	// from which a restarted staticpod counts the pod's active deadline.
	LabelPodStartTime = labelPrefix + "pod.start-time"

	// Set when the task starts and when its exit is recorded (see reap): containerd
	// keeps neither once a task is deleted.
	labelStartedAt  = labelPrefix + "started-at"
	labelFinishedAt = labelPrefix + "finished-at"
	labelExitCode   = labelPrefix + "exit-code"
	labelReason     = labelPrefix + "reason"
	// labelOOMKilled is set when the shim reports an OOM kill in the container's
	// cgroup (see recordOOM).
	labelOOMKilled = labelPrefix + "oom-killed"
	// labelPodOOMKills is the OOM kill count of the pod's cgroup when the container
	// was created (see oomKilled).
	labelPodOOMKills = labelPrefix + "pod-oom-kills"
	labelMessage     = labelPrefix + "message"
	// labelMessagePending marks an exit recorded before its message, which comes from
	// the log once the task is deleted (see reap).
	labelMessagePending = labelPrefix + "message-pending"
	labelImageID        = labelPrefix + "image-id" // the image's digest, reported as imageID
	// labelPinned marks a sandbox that is pinned namespaces, not a process: its value
	// is the directory of the pins (see pinned.go).
	labelPinned = labelPrefix + "pinned-namespaces"
	// labelPinnedFiles lists the namespace files there: net,uts[,ipc].
	labelPinnedFiles = labelPrefix + "pinned-namespaces.files"
	// labelSandbox names, on a container in a pinned sandbox, that sandbox: the shim
	// group the container's task belongs to (see keepTask).
	labelSandbox = labelPrefix + "sandbox"
	// labelStopDeadline is set when a stop begins: when its grace period ends.
	labelStopDeadline = labelPrefix + "stop-deadline"
	// labelNetwork, on a sandbox with a pod network, is what tears it down (a
	// podnet.Record as JSON), until it is torn down; labelPodIPs are its IPs, separated
	// by commas; labelNetworkNote, on a sandbox without one, says why.
	labelNetwork     = labelPrefix + "network"
	labelPodIPs      = labelPrefix + "pod-ips"
	labelNetworkNote = labelPrefix + "network-note"
)

// maxLabelSize is the most containerd keeps in one label, key and value together.
const maxLabelSize = 4096

// maxGraceSeconds is the longest grace period a label may give: longer would overflow a
// time.Duration.
const maxGraceSeconds = int64(math.MaxInt64 / time.Second)

// podLabels are the labels of everything that belongs to pod. The pod's location (its
// staticpod.io/config.location, a URL already without credentials or query values)
// tells a restarted staticpod which definition runs under the UID; one that is not
// valid UTF-8 or too long for a label is left out, and the pod is then told by its name
// and source alone (runner.RunningPod). The pod's status.startTime, when the runner
// gives one (start), is recorded too (runner.Container.PodStart).
func podLabels(pod *corev1.Pod, start runner.Timestamp, kind runner.Kind, name string, attempt int) map[string]string {
	labels := map[string]string{
		LabelKind:         string(kind),
		LabelPodUID:       string(pod.UID),
		LabelPodName:      pod.Name,
		LabelPodNamespace: pod.Namespace,
		LabelContainer:    name,
		LabelAttempt:      strconv.Itoa(attempt),
		LabelSource:       pod.Annotations[manifests.AnnotationSource],
	}
	if loc := pod.Annotations[manifests.AnnotationLocation]; utf8.ValidString(loc) && len(LabelPodLocation)+len(loc) <= maxLabelSize {
		labels[LabelPodLocation] = loc
	}
	if start != "" {
		labels[LabelPodStartTime] = string(start)
	}
	return labels
}

// stopLabels records in labels what stopping container c needs once its pod's spec
// is gone: the pod's grace period and, where it has one, the preStop hook with the
// ports it may name. A hook too large for a label is left out, with the effect that
// an orphan of it stops without its hook.
func stopLabels(labels map[string]string, pod *corev1.Pod, c *corev1.Container) {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		labels[LabelPodGrace] = strconv.FormatInt(*g, 10)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return
	}
	data, err := json.Marshal(corev1.Container{
		Name: c.Name, Ports: c.Ports, Lifecycle: &corev1.Lifecycle{PreStop: c.Lifecycle.PreStop},
	})
	if err == nil && len(LabelPreStop)+len(data) <= maxLabelSize {
		labels[LabelPreStop] = string(data)
	}
}

// sandboxLabels are the labels of pod's sandbox (cfg resolved the pod): the pod's; the
// hash of the pod's fields the sandbox is made from (manifests.SandboxHash), by which
// the runner tells when an edit of the pod needs a new sandbox; and how the pod is
// networked: what tears down its pod network (a), or why it has none (note).
func sandboxLabels(pod *corev1.Pod, cfg runner.PodConfig, attempt int, a *podnet.Attachment, note string) map[string]string {
	labels := podLabels(pod, cfg.Start, runner.KindSandbox, pod.Name, attempt)
	labels[LabelHash] = cfg.SandboxHash
	if a != nil {
		labels[labelNetwork] = a.Record.Label(maxLabelSize - len(labelNetwork))
	} else if note != "" {
		labels[labelNetworkNote] = note
	}
	return labels
}

// containerLabels are the labels of attempt of container c of pod (cfg resolved the
// pod) that its spec gives: the pod's, its termination message policy and what stopping it needs
// (stopLabels).
func containerLabels(pod *corev1.Pod, cfg runner.PodConfig, c *corev1.Container, attempt int) map[string]string {
	labels := podLabels(pod, cfg.Start, runner.KindContainer, c.Name, attempt)
	labels[LabelTermPolicy] = string(c.TerminationMessagePolicy)
	stopLabels(labels, pod, c)
	return labels
}

// setLabels sets (or, with an empty value, removes) labels of a container and returns
// all of its labels, in one call: the update names only the labels it sets, as the
// client's SetLabels does, with no record read first.
func (r *Runtime) setLabels(ctx context.Context, id string, labels map[string]string) (map[string]string, error) {
	paths := make([]string, 0, len(labels))
	for k := range labels {
		paths = append(paths, "labels."+k)
	}
	updated, err := r.client.ContainerService().Update(ctx, containers.Container{ID: id, Labels: labels}, paths...)
	if err != nil {
		return nil, convertErr(err)
	}
	return updated.Labels, nil
}
