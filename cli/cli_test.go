package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/events"
)

// cliNow is the fixed time of the printer tests.
var cliNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func cliAgo(d time.Duration) metav1.Time { return metav1.Time{Time: cliNow.Add(-d)} }

func csRunning(ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "main", Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: cliAgo(time.Minute)}}}
}

func csWaiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func csExited(name, reason string, code int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, FinishedAt: cliAgo(time.Minute)}}}
}

// statusPod is a pod with one app container (and init containers when inits is given).
func statusPod(phase corev1.PodPhase, apps []corev1.ContainerStatus, inits ...corev1.ContainerStatus) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default"}}
	for _, cs := range apps {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: cs.Name})
	}
	for _, cs := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: cs.Name})
	}
	pod.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: apps, InitContainerStatuses: inits}
	return pod
}

func withCondition(pod *corev1.Pod, t corev1.PodConditionType, ok bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ok {
		st = corev1.ConditionTrue
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: st})
	return pod
}

func TestPSStatusColumn(t *testing.T) {
	crashing := csWaiting("main", runner.ReasonCrashLoopBackOff)
	crashing.RestartCount = 3
	crashing.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: cliAgo(30 * time.Second)}
	sidecar := csRunning(true)
	sidecar.Name, sidecar.Started = "proxy", pointerTo(true)
	sidecarPod := statusPod(corev1.PodRunning, []corev1.ContainerStatus{csRunning(true)}, sidecar)
	sidecarPod.Spec.InitContainers[0].RestartPolicy = pointerTo(corev1.ContainerRestartPolicyAlways)
	initRestarted := csExited("setup", "Completed", 0)
	initRestarted.RestartCount = 2
	terminating := statusPod(corev1.PodRunning, []corev1.ContainerStatus{csRunning(true)})
	terminating.DeletionTimestamp = &metav1.Time{Time: cliNow}
	rolledBack := statusPod(corev1.PodRunning, []corev1.ContainerStatus{csRunning(true)})
	rolledBack.Annotations = map[string]string{manifests.AnnotationRolledBackFrom: "0123456789abcdef"}
	two := func(a, b corev1.ContainerStatus) []corev1.ContainerStatus {
		b.Name = "second"
		return []corev1.ContainerStatus{a, b}
	}

	for _, tc := range []struct {
		name                    string
		pod                     *corev1.Pod
		ready, status, restarts string
	}{
		{"running", statusPod(corev1.PodRunning, []corev1.ContainerStatus{csRunning(true)}), "1/1", "Running", "0"},
		{"not ready", statusPod(corev1.PodRunning, []corev1.ContainerStatus{csRunning(false)}), "0/1", "Running", "0"},
		{"pending", statusPod(corev1.PodPending, nil), "0/0", "Pending", "0"},
		{"creating", statusPod(corev1.PodPending, []corev1.ContainerStatus{csWaiting("main", runner.ReasonContainerCreating)}), "0/1", "ContainerCreating", "0"},
		{"crash loop", statusPod(corev1.PodRunning, []corev1.ContainerStatus{crashing}), "0/1", "CrashLoopBackOff", "3 (30s ago)"},
		{"pull error", statusPod(corev1.PodPending, []corev1.ContainerStatus{csWaiting("main", runner.ReasonErrImagePull)}), "0/1", "ErrImagePull", "0"},
		{"pull back-off", statusPod(corev1.PodPending, []corev1.ContainerStatus{csWaiting("main", runner.ReasonImagePullBackOff)}), "0/1", "ImagePullBackOff", "0"},
		{"config error", statusPod(corev1.PodPending, []corev1.ContainerStatus{csWaiting("main", runner.ReasonCreateConfigError)}), "0/1", "CreateContainerConfigError", "0"},
		{"init waiting", statusPod(corev1.PodPending, []corev1.ContainerStatus{csWaiting("main", runner.ReasonPodInitializing)}, csWaiting("setup", runner.ReasonPodInitializing)), "0/1", "Init:0/1", "0"},
		{"init creating", statusPod(corev1.PodPending, []corev1.ContainerStatus{csWaiting("main", runner.ReasonPodInitializing)}, csWaiting("setup", runner.ReasonContainerCreating)), "0/1", "Init:ContainerCreating", "0"},
		{"second init running", statusPod(corev1.PodPending, []corev1.ContainerStatus{csWaiting("main", runner.ReasonPodInitializing)}, csExited("a", "Completed", 0), corev1.ContainerStatus{Name: "b", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}), "0/1", "Init:1/2", "0"},
		{"init crash loop", statusPod(corev1.PodPending, []corev1.ContainerStatus{csWaiting("main", runner.ReasonPodInitializing)}, csWaiting("setup", runner.ReasonCrashLoopBackOff)), "0/1", "Init:CrashLoopBackOff", "0"},
		{"init failed", statusPod(corev1.PodFailed, []corev1.ContainerStatus{csWaiting("main", runner.ReasonPodInitializing)}, csExited("setup", "Error", 1)), "0/1", "Init:Error", "0"},
		{"init exit code", statusPod(corev1.PodFailed, []corev1.ContainerStatus{csWaiting("main", runner.ReasonPodInitializing)}, csExited("setup", "", 2)), "0/1", "Init:ExitCode:2", "0"},
		{"initializing", statusPod(corev1.PodPending, []corev1.ContainerStatus{csWaiting("main", runner.ReasonPodInitializing)}, csExited("setup", "Completed", 0)), "0/1", "PodInitializing", "0"},
		{"init restarts not counted once initialized", withCondition(statusPod(corev1.PodRunning, []corev1.ContainerStatus{csRunning(true)}, initRestarted), corev1.PodInitialized, true), "1/1", "Running", "0"},
		{"sidecar", sidecarPod, "2/2", "Running", "0"},
		{"completed", statusPod(corev1.PodSucceeded, []corev1.ContainerStatus{csExited("main", "Completed", 0)}), "0/1", "Completed", "0"},
		{"error", statusPod(corev1.PodFailed, []corev1.ContainerStatus{csExited("main", "Error", 3)}), "0/1", "Error", "0"},
		{"exit code", statusPod(corev1.PodFailed, []corev1.ContainerStatus{csExited("main", "", 3)}), "0/1", "ExitCode:3", "0"},
		{"oom", statusPod(corev1.PodRunning, []corev1.ContainerStatus{csExited("main", "OOMKilled", 137)}), "0/1", "OOMKilled", "0"},
		{"completed and running, ready", withCondition(statusPod(corev1.PodRunning, two(csRunning(true), csExited("x", "Completed", 0))), corev1.PodReady, true), "1/2", "Running", "0"},
		{"completed and running, not ready", withCondition(statusPod(corev1.PodRunning, two(csRunning(true), csExited("x", "Completed", 0))), corev1.PodReady, false), "1/2", "NotReady", "0"},
		{"terminating", terminating, "1/1", "Terminating", "0"},
		{"rolled back", rolledBack, "1/1", "Running (rolled back)", "0"},
	} {
		row := podRow(tc.pod, cliNow, false)
		if got, want := row[1:4], []string{tc.ready, tc.status, tc.restarts}; !cmp.Equal(got, want) {
			t.Errorf("%s: READY STATUS RESTARTS = %q, want %q", tc.name, got, want)
		}
	}
}

func pointerTo[T any](v T) *T { return &v }

func TestPSRestartsAndAge(t *testing.T) {
	pod := statusPod(corev1.PodRunning, []corev1.ContainerStatus{csRunning(true)})
	pod.Status.ContainerStatuses[0].RestartCount = 12
	pod.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{FinishedAt: cliAgo(3*time.Hour + 5*time.Minute)}
	pod.Status.StartTime = &metav1.Time{Time: cliNow.Add(-5 * time.Hour)}
	if got := podRow(pod, cliNow, false); got[3] != "12 (3h5m ago)" || got[4] != "5h" {
		t.Errorf("RESTARTS, AGE = %q, %q; want 12 (3h5m ago), 5h (from startTime)", got[3], got[4])
	}
	pod.Annotations = map[string]string{manifests.AnnotationSeen: cliNow.Add(-49 * time.Hour).Format(time.RFC3339Nano)}
	if got := podRow(pod, cliNow, false)[4]; got != "2d1h" {
		t.Errorf("AGE = %q, want 2d1h (config.seen wins over startTime)", got)
	}
	pod.CreationTimestamp = cliAgo(90 * time.Second)
	if got := podRow(pod, cliNow, false)[4]; got != "90s" {
		t.Errorf("AGE = %q, want 90s (creationTimestamp wins)", got)
	}
	pod.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{}
	pod.CreationTimestamp, pod.Annotations, pod.Status.StartTime = metav1.Time{}, nil, nil
	if got := podRow(pod, cliNow, false); got[3] != "12" || got[4] != "<unknown>" {
		t.Errorf("RESTARTS, AGE = %q, %q; want 12, <unknown>", got[3], got[4])
	}
}

func TestSplitArgsTakesFlagsAfterThePod(t *testing.T) {
	var args, rest []string
	var tty, stdin bool
	var container string
	app := &cli.App{Commands: []*cli.Command{{
		Name: "exec", UseShortOptionHandling: true,
		Flags: []cli.Flag{containerFlag(), &cli.BoolFlag{Name: "stdin", Aliases: []string{"i"}}, &cli.BoolFlag{Name: "tty", Aliases: []string{"t"}}},
		Action: func(c *cli.Context) (err error) {
			args, rest, err = splitArgs(c)
			tty, stdin, container = c.Bool("tty"), c.Bool("stdin"), c.String("container")
			return err
		},
	}}}
	if err := app.Run([]string{"staticpod", "exec", "web-node1", "-it", "--container=main", "--", "sh", "-c", "echo -n hi"}); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(args, []string{"web-node1"}) || !cmp.Equal(rest, []string{"sh", "-c", "echo -n hi"}) || !tty || !stdin || container != "main" {
		t.Errorf("split = %q, %q, tty %v, stdin %v, container %q", args, rest, tty, stdin, container)
	}
}

// etcdPod is a control-plane pod as staticpod reports it, with an init container,
// probes, resources, environment, mounts and volumes.
func etcdPod() *corev1.Pod {
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	started := cliNow.Add(-10 * time.Minute)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-node1", Namespace: "kube-system",
			Labels: map[string]string{"component": "etcd", "tier": "control-plane"},
			Annotations: map[string]string{manifests.AnnotationSource: "file", manifests.AnnotationLocation: "/etc/kubernetes/manifests/etcd.yaml",
				manifests.AnnotationHash: "0123abcd"}},
		Spec: corev1.PodSpec{
			NodeName: "node1", HostNetwork: true,
			InitContainers: []corev1.Container{{Name: "wait", Image: "busybox:1.36", Command: []string{"sh", "-c", "true"}}},
			Containers: []corev1.Container{{
				Name: "etcd", Image: "registry.k8s.io/etcd:3.5.9-0",
				Command:   []string{"etcd", "--data-dir=/var/lib/etcd"},
				Ports:     []corev1.ContainerPort{{ContainerPort: 2379, HostPort: 2379, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")}},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(2381), Path: "/livez", Scheme: corev1.URISchemeHTTP}},
					InitialDelaySeconds: 10, TimeoutSeconds: 15, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 8},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"etcdctl", "endpoint", "health"}}},
					TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3},
				Env: []corev1.EnvVar{{Name: "ETCD_NAME", Value: "node1"},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "etcd-data", MountPath: "/var/lib/etcd"}, {Name: "certs", MountPath: "/etc/kubernetes/pki/etcd", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{
				{Name: "certs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/kubernetes/pki/etcd", Type: &dirOrCreate}}},
				{Name: "etcd-data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			StartTime: &metav1.Time{Time: started}, QOSClass: corev1.PodQOSBurstable,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "wait", ContainerID: "containerd://aaa", Image: "busybox:1.36", ImageID: "sha256:111",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: metav1.Time{Time: started}, FinishedAt: metav1.Time{Time: started.Add(time.Second)}}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", ContainerID: "containerd://bbb", ImageID: "sha256:222", Ready: true, RestartCount: 1,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: started.Add(time.Minute)}}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2,
					StartedAt: metav1.Time{Time: started.Add(2 * time.Second)}, FinishedAt: metav1.Time{Time: started.Add(50 * time.Second)}}}}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		},
	}
}

func TestDescribeLayout(t *testing.T) {
	events := []events.Record{
		{Type: "Normal", Reason: "Started", Message: "Started container etcd", Container: "etcd", First: cliNow.Add(-9 * time.Minute), Last: cliNow.Add(-9 * time.Minute), Count: 1},
		{Type: "Warning", Reason: "Unhealthy", Message: "Liveness probe failed: HTTP probe failed with statuscode: 503", Container: "etcd",
			First: cliNow.Add(-8 * time.Minute), Last: cliNow.Add(-5 * time.Second), Count: 3},
	}
	var out bytes.Buffer
	if err := describePod(&out, etcdPod(), events, nil, cliNow); err != nil {
		t.Fatal(err)
	}
	want := `Name:         etcd-node1
Namespace:    kube-system
Node:         node1/10.0.0.1
Start Time:   Sun, 01 Mar 2026 11:50:00 +0000
Labels:       component=etcd
              tier=control-plane
Annotations:  kubernetes.io/config.hash: 0123abcd
              kubernetes.io/config.source: file
              staticpod.io/config.location: /etc/kubernetes/manifests/etcd.yaml
Status:       Running
IP:           10.0.0.1
IPs:
  IP:    10.0.0.1
Source:  file:/etc/kubernetes/manifests/etcd.yaml
Init Containers:
  wait:
    Container ID:  containerd://aaa
    Image:         busybox:1.36
    Image ID:      sha256:111
    Port:          <none>
    Host Port:     <none>
    Command:
      sh
      -c
      true
    State:          Terminated
      Reason:       Completed
      Exit Code:    0
      Started:      Sun, 01 Mar 2026 11:50:00 +0000
      Finished:     Sun, 01 Mar 2026 11:50:01 +0000
    Ready:          False
    Restart Count:  0
    Environment:    <none>
    Mounts:         <none>
Containers:
  etcd:
    Container ID:  containerd://bbb
    Image:         registry.k8s.io/etcd:3.5.9-0
    Image ID:      sha256:222
    Port:          2379/TCP
    Host Port:     2379/TCP
    Command:
      etcd
      --data-dir=/var/lib/etcd
    State:          Running
      Started:      Sun, 01 Mar 2026 11:51:00 +0000
    Last State:     Terminated
      Reason:       Error
      Exit Code:    2
      Started:      Sun, 01 Mar 2026 11:50:02 +0000
      Finished:     Sun, 01 Mar 2026 11:50:50 +0000
    Ready:          True
    Restart Count:  1
    Requests:
      cpu:      100m
      memory:   100Mi
    Liveness:   http-get http://127.0.0.1:2381/livez delay=10s timeout=15s period=10s #success=1 #failure=8
    Readiness:  exec [etcdctl endpoint health] delay=0s timeout=1s period=5s #success=1 #failure=3
    Environment:
      ETCD_NAME:  node1
      POD_IP:      (v1:status.podIP)
    Mounts:
      /etc/kubernetes/pki/etcd from certs (ro)
      /var/lib/etcd from etcd-data (rw)
Conditions:
  Type              Status
  Initialized       True 
  Ready             True 
  ContainersReady   True 
  PodScheduled      True 
Volumes:
  certs:
    Type:          HostPath (bare host directory volume)
    Path:          /etc/kubernetes/pki/etcd
    HostPathType:  DirectoryOrCreate
  etcd-data:
    Type:        EmptyDir (a temporary directory that shares a pod's lifetime)
    Medium:      Memory
    SizeLimit:   <unset>
QoS Class:       Burstable
Pod Limits:      <none>
Node-Selectors:  <none>
Tolerations:     :NoExecute op=Exists
Events:
  Type     Reason     Age              From       Message
  ----     ------     ----             ----       -------
  Normal   Started    9m               staticpod  Started container etcd
  Warning  Unhealthy  5s (x3 over 8m)  staticpod  Liveness probe failed: HTTP probe failed with statuscode: 503
`
	if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(out.String(), "\n")); diff != "" {
		t.Errorf("describe (-want +got):\n%s", diff)
	}
	out.Reset()
	describeEvents(prefixWriter{&out}, nil, errors.New("HTTP 404"), cliNow)
	if got := out.String(); got != "Events:\t<cannot read: HTTP 404>\n" {
		t.Errorf("events that cannot be read: %q", got)
	}
}

func TestDescribeObjectVolumes(t *testing.T) {
	pod := etcdPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "etcd-config"}}}},
		{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-tls", Optional: new(true)}}},
	}
	var out bytes.Buffer
	if err := describePod(&out, pod, nil, nil, cliNow); err != nil {
		t.Fatal(err)
	}
	want := `Volumes:
  config:
    Type:      ConfigMap (a volume populated by a ConfigMap)
    Name:      etcd-config
    Optional:  false
  tls:
    Type:        Secret (a volume populated by a Secret)
    SecretName:  etcd-tls
    Optional:    true
`
	if !strings.Contains(out.String(), want) {
		t.Errorf("describe lacks\n%s\nin:\n%s", want, out.String())
	}
}

func TestDescribePodLimits(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")}}},
		{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("150m")}}},
	}}}
	if got, want := podLimits(pod), "cpu=250m"; got != want {
		t.Errorf("pod limits with a container without a memory limit: %q, want %q", got, want)
	}
	pod.Spec.Containers[1].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("16Mi")
	if got, want := podLimits(pod), "cpu=250m, memory=48Mi"; got != want {
		t.Errorf("pod limits: %q, want %q", got, want)
	}
}

// A pod's pod-level limits (spec.resources) are its cgroup's, whatever its containers
// ask: describe's Pod Limits shows them.
func TestDescribePodLevelLimits(t *testing.T) {
	pod := etcdPod() // its container requests 100m and 100Mi and limits nothing
	pod.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")}}
	var out bytes.Buffer
	if err := describePod(&out, pod, nil, nil, cliNow); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Pod Limits: cpu=1, memory=256Mi", "QoS Class: Burstable"} {
		found := false
		for line := range strings.Lines(out.String()) {
			found = found || strings.Join(strings.Fields(line), " ") == want
		}
		if !found {
			t.Errorf("describe lacks %q in:\n%s", want, out.String())
		}
	}
}

// A pod's RuntimeClass is named, and its overhead counted in its Pod Limits, as the
// kubelet sizes its cgroup.
func TestDescribeRuntimeClassAndOverhead(t *testing.T) {
	pod := etcdPod()
	pod.Spec.RuntimeClassName = new("light")
	pod.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("24Mi")}}
	pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Mi")}
	var out bytes.Buffer
	if err := describePod(&out, pod, nil, nil, cliNow); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Runtime Class Name: light", "Pod Limits: memory=32Mi"} {
		found := false
		for line := range strings.Lines(out.String()) {
			found = found || strings.Join(strings.Fields(line), " ") == want
		}
		if !found {
			t.Errorf("describe lacks %q in:\n%s", want, out.String())
		}
	}
}
