package cli

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/manifests"
)

// describeTime is how describe prints times, as kubectl does.
const describeTime = time.RFC1123Z

// Describe is the describe command: a pod's source, containers, state and events.
func Describe() *cli.Command {
	return &cli.Command{
		Name:         "describe",
		BashComplete: completePods(false),
		Usage:        "show a pod's source, containers, state and events, or the node's labels, taints and resources",
		ArgsUsage:    "POD | node",
		Description:  "POD is the pod's full static name (web-node1) or namespace/name; node describes the node the daemon admits pods on.",
		Flags:        clientFlags(),
		Action:       runDescribe,
	}
}

func runDescribe(c *cli.Context) error {
	if c.NArg() == 1 && c.Args().First() == "node" {
		return runDescribeNode(c)
	}
	req, err := lookupPod(c, "describe")
	if err != nil {
		return err
	}
	defer req.stop()
	// Usage is a nicety: a daemon without it, or a pod not sampled yet, shows none.
	var usage *statsapi.PodStats
	if sum, err := req.api.Summary(req.ctx); err == nil {
		usage = podUsage(sum, req.pod)
	}
	events, evErr := req.api.Events(req.ctx, req.ref.Namespace, req.ref.Name)
	return exitError("describe", describePodUsage(c.App.Writer, req.pod, usage, events, explain(evErr), time.Now()))
}

// prefixWriter writes describe's lines, indented two spaces per level, to a tab
// writer that aligns the values of each block of "Key:\tvalue" lines.
type prefixWriter struct{ w io.Writer }

func (p prefixWriter) write(level int, format string, a ...any) {
	fmt.Fprintf(p.w, strings.Repeat("  ", level)+format, a...)
}

// list writes "Title:\tfirst" and the other items below the first, or <none>.
func (p prefixWriter) list(level int, title string, items []string) {
	if len(items) == 0 {
		p.write(level, "%s:\t<none>\n", title)
		return
	}
	for i, item := range items {
		if i == 0 {
			p.write(level, "%s:\t%s\n", title, item)
		} else {
			p.write(level, "\t%s\n", item)
		}
	}
}

// describePod prints a pod as kubectl describe does, with its source, and events (or
// why they could not be read).
func describePod(out io.Writer, pod *corev1.Pod, events []wire.Event, eventsErr error, now time.Time) error {
	return describePodUsage(out, pod, nil, events, eventsErr, now)
}

// describePodUsage is describePod with what the pod and its containers use, when
// usage is not nil.
func describePodUsage(out io.Writer, pod *corev1.Pod, usage *statsapi.PodStats, events []wire.Event, eventsErr error, now time.Time) error {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	p := prefixWriter{tw}
	describeMeta(p, pod)
	if len(pod.Spec.InitContainers) > 0 {
		p.write(0, "Init Containers:\n")
		describeContainers(p, pod.Spec.InitContainers, pod.Status.InitContainerStatuses, pod.Spec.Volumes)
	}
	p.write(0, "Containers:\n")
	describeContainers(p, pod.Spec.Containers, pod.Status.ContainerStatuses, pod.Spec.Volumes)
	describeConditions(p, pod.Status.Conditions)
	describeVolumes(p, pod.Spec.Volumes)
	p.write(0, "QoS Class:\t%s\n", pod.Status.QOSClass)
	p.write(0, "Pod Limits:\t%s\n", podLimits(pod))
	describeUsage(p, usage, now)
	p.list(0, "Node-Selectors", keyValues(pod.Spec.NodeSelector, "="))
	p.list(0, "Tolerations", tolerations(pod.Spec.Tolerations))
	describeEvents(p, events, eventsErr, now)
	return tw.Flush()
}

func describeMeta(p prefixWriter, pod *corev1.Pod) {
	p.write(0, "Name:\t%s\n", pod.Name)
	p.write(0, "Namespace:\t%s\n", pod.Namespace)
	if pod.Spec.Priority != nil {
		p.write(0, "Priority:\t%d\n", *pod.Spec.Priority)
	}
	if pod.Spec.PriorityClassName != "" {
		p.write(0, "Priority Class Name:\t%s\n", pod.Spec.PriorityClassName)
	}
	if rc := pod.Spec.RuntimeClassName; rc != nil && *rc != "" {
		p.write(0, "Runtime Class Name:\t%s\n", *rc)
	}
	node := pod.Spec.NodeName
	if pod.Status.HostIP != "" {
		node += "/" + pod.Status.HostIP
	}
	p.write(0, "Node:\t%s\n", orNone(node))
	if st := pod.Status.StartTime; st != nil {
		p.write(0, "Start Time:\t%s\n", st.Time.Format(describeTime))
	}
	p.list(0, "Labels", keyValues(pod.Labels, "="))
	p.list(0, "Annotations", keyValues(pod.Annotations, ": "))
	p.write(0, "Status:\t%s\n", pod.Status.Phase)
	if pod.Status.Reason != "" {
		p.write(0, "Reason:\t%s\n", pod.Status.Reason)
	}
	if pod.Status.Message != "" {
		p.write(0, "Message:\t%s\n", pod.Status.Message)
	}
	p.write(0, "IP:\t%s\n", podIP(pod))
	if len(pod.Status.PodIPs) == 0 {
		p.write(0, "IPs:\t<none>\n")
	} else {
		p.write(0, "IPs:\n")
		for _, ip := range pod.Status.PodIPs {
			p.write(1, "IP:\t%s\n", ip.IP)
		}
	}
	p.write(0, "Source:\t%s\n", orNone(podSource(pod)))
}

func describeContainers(p prefixWriter, containers []corev1.Container, statuses []corev1.ContainerStatus, volumes []corev1.Volume) {
	for _, c := range containers {
		var status *corev1.ContainerStatus
		for i := range statuses {
			if statuses[i].Name == c.Name {
				status = &statuses[i]
			}
		}
		describeContainer(p, c, status, volumes)
	}
}

func describeContainer(p prefixWriter, c corev1.Container, status *corev1.ContainerStatus, volumes []corev1.Volume) {
	p.write(1, "%s:\n", c.Name)
	if status != nil && status.ContainerID != "" {
		p.write(2, "Container ID:\t%s\n", status.ContainerID)
	}
	p.write(2, "Image:\t%s\n", c.Image)
	if status != nil {
		p.write(2, "Image ID:\t%s\n", status.ImageID)
	}
	describePorts(p, c.Ports)
	describeLines(p, "Command", c.Command)
	describeLines(p, "Args", c.Args)
	if status != nil {
		describeState(p, "State", status.State)
		if status.LastTerminationState.Terminated != nil {
			describeState(p, "Last State", status.LastTerminationState)
		}
		p.write(2, "Ready:\t%s\n", printBool(status.Ready))
		p.write(2, "Restart Count:\t%d\n", status.RestartCount)
	}
	describeResources(p, "Limits", c.Resources.Limits)
	describeResources(p, "Requests", c.Resources.Requests)
	for _, probe := range []struct {
		name  string
		probe *corev1.Probe
	}{{"Liveness", c.LivenessProbe}, {"Readiness", c.ReadinessProbe}, {"Startup", c.StartupProbe}} {
		if probe.probe != nil {
			p.write(2, "%s:\t%s\n", probe.name, describeProbe(probe.probe))
		}
	}
	describeEnv(p, c.Env)
	describeMounts(p, c.VolumeMounts, volumes)
}

func describePorts(p prefixWriter, ports []corev1.ContainerPort) {
	var cports, hports []string
	for _, port := range ports {
		cports = append(cports, fmt.Sprintf("%d/%s", port.ContainerPort, port.Protocol))
		hports = append(hports, fmt.Sprintf("%d/%s", port.HostPort, port.Protocol))
	}
	plural := func(s string) string {
		if len(ports) > 1 {
			return s + "s"
		}
		return s
	}
	p.write(2, "%s:\t%s\n", plural("Port"), orNone(strings.Join(cports, ", ")))
	p.write(2, "%s:\t%s\n", plural("Host Port"), orNone(strings.Join(hports, ", ")))
}

// describeLines prints a command or its arguments one per line, as kubectl does.
func describeLines(p prefixWriter, title string, lines []string) {
	if len(lines) == 0 {
		return
	}
	p.write(2, "%s:\n", title)
	for _, l := range lines {
		for _, s := range strings.Split(l, "\n") {
			p.write(3, "%s\n", s)
		}
	}
}

func describeState(p prefixWriter, title string, st corev1.ContainerState) {
	switch {
	case st.Running != nil:
		p.write(2, "%s:\tRunning\n", title)
		p.write(3, "Started:\t%s\n", st.Running.StartedAt.Time.Format(describeTime))
	case st.Terminated != nil:
		t := st.Terminated
		p.write(2, "%s:\tTerminated\n", title)
		if t.Reason != "" {
			p.write(3, "Reason:\t%s\n", t.Reason)
		}
		if t.Message != "" {
			p.write(3, "Message:\t%s\n", t.Message)
		}
		p.write(3, "Exit Code:\t%d\n", t.ExitCode)
		if t.Signal > 0 {
			p.write(3, "Signal:\t%d\n", t.Signal)
		}
		p.write(3, "Started:\t%s\n", t.StartedAt.Time.Format(describeTime))
		p.write(3, "Finished:\t%s\n", t.FinishedAt.Time.Format(describeTime))
	default:
		p.write(2, "%s:\tWaiting\n", title)
		if st.Waiting != nil && st.Waiting.Reason != "" {
			p.write(3, "Reason:\t%s\n", st.Waiting.Reason)
		}
		if st.Waiting != nil && st.Waiting.Message != "" {
			p.write(3, "Message:\t%s\n", st.Waiting.Message)
		}
	}
}

func describeResources(p prefixWriter, title string, list corev1.ResourceList) {
	if len(list) == 0 {
		return
	}
	p.write(2, "%s:\n", title)
	names := make([]string, 0, len(list))
	for name := range list {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		q := list[corev1.ResourceName(name)]
		p.write(3, "%s:\t%s\n", name, q.String())
	}
}

// describeProbe prints a probe as kubectl does:
// http-get http://127.0.0.1:2381/livez delay=10s timeout=15s period=10s #success=1 #failure=8
func describeProbe(probe *corev1.Probe) string {
	attrs := fmt.Sprintf("delay=%ds timeout=%ds period=%ds #success=%d #failure=%d", probe.InitialDelaySeconds,
		probe.TimeoutSeconds, probe.PeriodSeconds, probe.SuccessThreshold, probe.FailureThreshold)
	switch h := probe.ProbeHandler; {
	case h.Exec != nil:
		return fmt.Sprintf("exec %v %s", h.Exec.Command, attrs)
	case h.HTTPGet != nil:
		u := &url.URL{Scheme: strings.ToLower(string(h.HTTPGet.Scheme)), Host: h.HTTPGet.Host, Path: h.HTTPGet.Path}
		if port := h.HTTPGet.Port.String(); port != "" {
			u.Host = net.JoinHostPort(h.HTTPGet.Host, port)
		}
		return fmt.Sprintf("http-get %s %s", u, attrs)
	case h.TCPSocket != nil:
		return fmt.Sprintf("tcp-socket %s:%s %s", h.TCPSocket.Host, h.TCPSocket.Port.String(), attrs)
	case h.GRPC != nil:
		service := ""
		if h.GRPC.Service != nil {
			service = *h.GRPC.Service
		}
		return fmt.Sprintf("grpc <pod>:%d %s %s", h.GRPC.Port, service, attrs)
	}
	return "unknown " + attrs
}

func describeEnv(p prefixWriter, env []corev1.EnvVar) {
	if len(env) == 0 {
		p.write(2, "Environment:\t<none>\n")
		return
	}
	p.write(2, "Environment:\n")
	for _, e := range env {
		switch from := e.ValueFrom; {
		case from == nil:
			for i, s := range strings.Split(e.Value, "\n") {
				if i == 0 {
					p.write(3, "%s:\t%s\n", e.Name, s)
				} else {
					p.write(3, "\t%s\n", s)
				}
			}
		case from.FieldRef != nil:
			p.write(3, "%s:\t (%s:%s)\n", e.Name, from.FieldRef.APIVersion, from.FieldRef.FieldPath)
		case from.ResourceFieldRef != nil:
			p.write(3, "%s:\t (%s)\n", e.Name, from.ResourceFieldRef.Resource)
		case from.SecretKeyRef != nil:
			p.write(3, "%s:\t<set to the key '%s' in secret '%s'>\tOptional: %t\n", e.Name, from.SecretKeyRef.Key, from.SecretKeyRef.Name, optional(from.SecretKeyRef.Optional))
		case from.ConfigMapKeyRef != nil:
			p.write(3, "%s:\t<set to the key '%s' of config map '%s'>\tOptional: %t\n", e.Name, from.ConfigMapKeyRef.Key, from.ConfigMapKeyRef.Name, optional(from.ConfigMapKeyRef.Optional))
		default:
			p.write(3, "%s:\t<set from a source staticpod does not resolve>\n", e.Name)
		}
	}
}

// describeMounts lists a container's mounts as kubectl does, (ro) or (rw), except that
// a mount of a volume that is read-only whatever the mount says is (ro): kubectl
// echoes the spec's readOnly, while the container gets what the kubelet (and
// staticpod's runtime) mounts.
func describeMounts(p prefixWriter, mounts []corev1.VolumeMount, volumes []corev1.Volume) {
	if len(mounts) == 0 {
		p.write(2, "Mounts:\t<none>\n")
		return
	}
	sorted := append([]corev1.VolumeMount(nil), mounts...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].MountPath < sorted[j].MountPath })
	p.write(2, "Mounts:\n")
	for _, m := range sorted {
		flags := []string{"rw"}
		if m.ReadOnly || readOnlyVolume(volumes, m.Name) {
			flags[0] = "ro"
		}
		if m.SubPath != "" {
			flags = append(flags, fmt.Sprintf("path=%q", m.SubPath))
		}
		p.write(3, "%s from %s (%s)\n", m.MountPath, m.Name, strings.Join(flags, ","))
	}
}

// readOnlyVolume reports whether the volume called name is mounted read-only whatever
// its mounts say: downwardAPI, configMap, secret, projected and image volumes are, on a
// kubelet as in staticpod's runtime (containerdrt/poddir's volumeSource).
func readOnlyVolume(volumes []corev1.Volume, name string) bool {
	for _, v := range volumes {
		if v.Name == name {
			return v.DownwardAPI != nil || v.ConfigMap != nil || v.Secret != nil || v.Projected != nil || v.Image != nil
		}
	}
	return false
}

func describeConditions(p prefixWriter, conditions []corev1.PodCondition) {
	if len(conditions) == 0 {
		return
	}
	p.write(0, "Conditions:\n  Type\tStatus\n")
	for _, c := range conditions {
		p.write(1, "%v \t%v \n", c.Type, c.Status)
	}
}

// optional is an optional flag as describe prints it: false when unset.
func optional(b *bool) bool { return b != nil && *b }

func describeVolumes(p prefixWriter, volumes []corev1.Volume) {
	if len(volumes) == 0 {
		p.write(0, "Volumes:\t<none>\n")
		return
	}
	p.write(0, "Volumes:\n")
	for _, v := range volumes {
		p.write(1, "%s:\n", v.Name)
		switch src := v.VolumeSource; {
		case src.HostPath != nil:
			kind := "<none>"
			if src.HostPath.Type != nil && *src.HostPath.Type != "" {
				kind = string(*src.HostPath.Type)
			}
			p.write(2, "Type:\tHostPath (bare host directory volume)\n")
			p.write(2, "Path:\t%s\n", src.HostPath.Path)
			p.write(2, "HostPathType:\t%s\n", kind)
		case src.EmptyDir != nil:
			limit := "<unset>"
			if l := src.EmptyDir.SizeLimit; l != nil && l.Sign() > 0 {
				limit = l.String()
			}
			p.write(2, "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n")
			p.write(2, "Medium:\t%s\n", src.EmptyDir.Medium)
			p.write(2, "SizeLimit:\t%s\n", limit)
		case src.DownwardAPI != nil:
			p.write(2, "Type:\tDownwardAPI (a volume populated by information about the pod)\n")
			p.write(2, "Items:\n")
			for _, item := range src.DownwardAPI.Items {
				if item.FieldRef != nil {
					p.write(3, "%s -> %s\n", item.FieldRef.FieldPath, item.Path)
				}
				if item.ResourceFieldRef != nil {
					p.write(3, "%s -> %s\n", item.ResourceFieldRef.Resource, item.Path)
				}
			}
		case src.ConfigMap != nil:
			p.write(2, "Type:\tConfigMap (a volume populated by a ConfigMap)\n")
			p.write(2, "Name:\t%s\n", src.ConfigMap.Name)
			p.write(2, "Optional:\t%v\n", optional(src.ConfigMap.Optional))
		case src.Secret != nil:
			p.write(2, "Type:\tSecret (a volume populated by a Secret)\n")
			p.write(2, "SecretName:\t%s\n", src.Secret.SecretName)
			p.write(2, "Optional:\t%v\n", optional(src.Secret.Optional))
		case src.Projected != nil:
			p.write(2, "Type:\tProjected (a volume that contains injected data from multiple sources)\n")
			for _, s := range src.Projected.Sources {
				switch {
				case s.ConfigMap != nil:
					p.write(2, "ConfigMapName:\t%s\n", s.ConfigMap.Name)
					p.write(2, "Optional:\t%v\n", optional(s.ConfigMap.Optional))
				case s.Secret != nil:
					p.write(2, "SecretName:\t%s\n", s.Secret.Name)
					p.write(2, "Optional:\t%v\n", optional(s.Secret.Optional))
				case s.DownwardAPI != nil:
					p.write(2, "DownwardAPI:\ttrue\n")
				}
			}
		case src.Image != nil:
			p.write(2, "Type:\tImage (a container image or OCI artifact)\n")
			p.write(2, "Reference:\t%s\n", src.Image.Reference)
			p.write(2, "PullPolicy:\t%s\n", src.Image.PullPolicy)
		default:
			p.write(2, "<unknown>\n")
		}
	}
}

// podLimits describes the limits of the pod's cgroup (manifests.PodLimits): what the
// pod may use as a whole.
func podLimits(pod *corev1.Pod) string {
	limits := manifests.PodLimits(pod)
	var out []string
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := limits[name]; ok {
			out = append(out, string(name)+"="+q.String())
		}
	}
	if len(out) == 0 {
		return "<none>"
	}
	return strings.Join(out, ", ")
}
