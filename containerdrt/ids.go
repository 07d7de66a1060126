package containerdrt

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// containerd refuses IDs over 76 characters; readable IDs keep the pod name first and
// shorten it when needed, while the UID prefix keeps them unique.
const (
	maxIDLength = 76
	uidPrefix   = 8
)

// containerID is a readable, unique containerd ID for attempt of container in pod:
// "<pod name>_<container>_<attempt>_<uid prefix>". Pod and container names are DNS
// names, so the result always matches containerd's ID rules.
func containerID(pod *corev1.Pod, container string, attempt int) string {
	return makeID(pod.Name, container+"_"+strconv.Itoa(attempt), pod.UID)
}

// sandboxID is the ID of a pod's sandbox: "<pod name>_<attempt>_<uid prefix>"; one
// field fewer than a container's, so the two never collide.
func sandboxID(pod *corev1.Pod, attempt int) string {
	return makeID(pod.Name, strconv.Itoa(attempt), pod.UID)
}

func makeID(podName, rest string, uid types.UID) string {
	u := strings.NewReplacer("-", "", "_", "", ".", "").Replace(string(uid))
	if len(u) > uidPrefix {
		u = u[:uidPrefix]
	}
	if u == "" {
		u = "0"
	}
	tail := "_" + rest + "_" + u
	if room := maxIDLength - len(tail); len(podName) > room {
		podName = strings.TrimRight(podName[:room], "-.")
	}
	return podName + tail
}

// podLabels are the labels of everything that belongs to pod. The pod's location (its
// staticpod.io/config.location, a URL already without credentials or query values)
// tells a restarted staticpod which definition runs under the UID; one that is not
// valid UTF-8 or too long for a label is left out, and the pod is then told by its name
// and source alone (runner.RunningPod). The pod's status.startTime, when the runner
// gives one, is recorded too (runner.Container.PodStart).
func podLabels(pod *corev1.Pod, kind runner.Kind, name string, attempt int) map[string]string {
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
	if st := pod.Status.StartTime; st != nil && !st.IsZero() {
		labels[LabelPodStartTime] = string(runner.TimestampOf(st.Time))
	}
	return labels
}

// maxGraceSeconds is the longest grace period a label may give: longer would overflow a
// time.Duration.
const maxGraceSeconds = int64(math.MaxInt64 / time.Second)

// fromLabels fills the identity of c from its labels. It fails for containers that are
// not staticpod's (no kind label).
func fromLabels(c *runner.Container, labels map[string]string) error {
	kind := runner.Kind(labels[LabelKind])
	if kind != runner.KindSandbox && kind != runner.KindContainer {
		return fmt.Errorf("container %s has no %s label", c.ID, LabelKind)
	}
	c.Kind = kind
	uid, err := podUIDOf(labels)
	if err != nil {
		return fmt.Errorf("container %s: %w", c.ID, err)
	}
	c.PodUID = uid
	c.PodName = labels[LabelPodName]
	c.PodNamespace = labels[LabelPodNamespace]
	c.Name = labels[LabelContainer]
	if n, err := strconv.Atoi(labels[LabelAttempt]); err == nil && n >= 0 {
		c.Attempt = n // a restart count; anything else reads as a first attempt
	}
	c.Hash = labels[LabelHash]
	c.Source = labels[LabelSource]
	c.Location = labels[LabelPodLocation]
	if secs, err := strconv.ParseInt(labels[LabelPodGrace], 10, 64); err == nil && secs >= 0 && secs <= maxGraceSeconds {
		grace := time.Duration(secs) * time.Second
		c.PodGrace = &grace
	}
	if data := labels[LabelPreStop]; data != "" {
		var spec corev1.Container
		if json.Unmarshal([]byte(data), &spec) == nil {
			c.PreStop = &spec
		}
	}
	c.StopDeadline = parseTime(labels[labelStopDeadline])
	c.PodStart = runner.Timestamp(labels[LabelPodStartTime]) // read when needed (podStart): a List parses no time for it
	if kind == runner.KindSandbox {
		networkFromLabels(c, labels)
	}
	return nil
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
