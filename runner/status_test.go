package runner

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// statusSummary renders a PodStatus as a short string for table comparison: the phase,
// the Ready condition, then each container (init containers first) as
// name:state[ reason][ ready][ restarts=N][ last=reason(code)].
func statusSummary(st corev1.PodStatus) string {
	parts := []string{string(st.Phase)}
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady {
			parts = append(parts, "ready="+string(c.Status))
		}
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, st.InitContainerStatuses...), st.ContainerStatuses...) {
		s := cs.Name + ":"
		switch {
		case cs.State.Running != nil:
			s += "running"
		case cs.State.Terminated != nil:
			s += fmt.Sprintf("terminated %s(%d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			if m := cs.State.Terminated.Message; m != "" {
				s += " " + m
			}
		case cs.State.Waiting != nil:
			s += "waiting " + cs.State.Waiting.Reason
		}
		if cs.Ready {
			s += " ready"
		}
		if cs.RestartCount > 0 {
			s += fmt.Sprintf(" restarts=%d", cs.RestartCount)
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			s += fmt.Sprintf(" last=%s(%d)", t.Reason, t.ExitCode)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " | ")
}

func TestStatus(t *testing.T) {
	always, never := corev1.RestartPolicyAlways, corev1.RestartPolicyNever
	exited := func(c Container, reason string) Container { c.Reason = reason; return c }
	tests := []struct {
		name string
		pod  *corev1.Pod
		rt   func(*corev1.Pod) []Container
		obs  Observed
		want string
	}{
		{"nothing created yet", planPod(always, true, nil, "a"), nil, Observed{},
			"Pending | ready=False | a:waiting ContainerCreating"},
		{"running and ready", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "a/0/running", 1)}
		}, Observed{}, "Running | ready=True | a:running ready"},
		{"a readiness probe failed", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "a/0/running", 1)}
		}, Observed{Unready: map[string]bool{"a": true}}, "Running | ready=False | a:running"},
		{"a startup probe has not passed", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "a/0/running", 1)}
		}, Observed{Unstarted: map[string]bool{"a": true}}, "Running | ready=False | a:running"},
		{"crash looping keeps its last exit", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{exited(ctr(p, "a/0/exited/1", 1), "Error"), exited(ctr(p, "a/1/exited/1", 2), "Error")}
		}, Observed{Waiting: map[string]corev1.ContainerStateWaiting{"a": {Reason: "CrashLoopBackOff"}}},
			"Running | ready=False | a:waiting CrashLoopBackOff restarts=1 last=Error(1)"},
		{"restarted after a crash", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{exited(ctr(p, "a/0/exited/137", 1), "Error"), ctr(p, "a/1/running", 2)}
		}, Observed{}, "Running | ready=True | a:running ready restarts=1 last=Error(137)"},
		{"init container running", planPod(always, false, []string{"i"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{sandbox(0, StateRunning, 0), ctr(p, "i/0/running", 1)}
		}, Observed{}, "Pending | ready=False | i:running | a:waiting PodInitializing"},
		{"init container done", planPod(always, false, []string{"i"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{sandbox(0, StateRunning, 0), exited(ctr(p, "i/0/exited/0", 1), "Completed"), ctr(p, "a/0/running", 2)}
		}, Observed{}, "Running | ready=True | i:terminated Completed(0) ready | a:running ready"},
		{"sidecar beside the app", planPod(always, false, []string{"side"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{sandbox(0, StateRunning, 0), ctr(p, "side/0/running", 1), ctr(p, "a/0/running", 2)}
		}, Observed{}, "Running | ready=True | side:running ready | a:running ready"},
		{"a job that succeeded", planPod(never, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{exited(ctr(p, "a/0/exited/0", 1), "Completed")}
		}, Observed{Done: true}, "Succeeded | ready=False | a:terminated Completed(0)"},
		{"a job that failed", planPod(never, true, nil, "a", "b"), func(p *corev1.Pod) []Container {
			return []Container{exited(ctr(p, "a/0/exited/0", 1), "Completed"), exited(ctr(p, "b/0/exited/3", 1), "Error")}
		}, Observed{Done: true}, "Failed | ready=False | a:terminated Completed(0) | b:terminated Error(3)"},
		{"a failed init container fails a Never pod", planPod(never, true, []string{"i"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{exited(ctr(p, "i/0/exited/2", 1), "Error")}
		}, Observed{Done: true}, "Failed | ready=False | i:terminated Error(2) | a:waiting PodInitializing"},
		{"killed by a probe says why", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{exited(ctr(p, "a/0/exited/137", 1), "Error")}
		}, Observed{KillReasons: map[string]string{"a/0/exited/137": "Liveness probe failed"}},
			"Running | ready=False | a:terminated Error(137) Liveness probe failed"},
		{"a new sandbox starts the containers over", planPod(always, false, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{sandbox(0, StateExited, 0), exited(ctr(p, "a/0/exited/255", 1), "Unknown"), sandbox(1, StateRunning, 2)}
		}, Observed{}, "Pending | ready=False | a:waiting ContainerCreating last=Unknown(255)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := podRuntimeOf(tt.pod, tt.rt)
			tt.obs.RuntimeType = "fake"
			if got := statusSummary(Status(tt.pod, rt, tt.obs, "10.0.0.1")); got != tt.want {
				t.Errorf("Status =\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

// The status names containers as the kubelet does (<type>://<id>), reports the host's
// IP as a host-network pod's IP, and the QoS class.
func TestStatusIdentity(t *testing.T) {
	pod := planPod(corev1.RestartPolicyAlways, true, nil, "a")
	rt := PodRuntime{Containers: []Container{ctr(pod, "a/0/running", 1)}}
	st := Status(pod, rt, Observed{RuntimeType: "containerd"}, "10.0.0.1")
	if got := st.ContainerStatuses[0].ContainerID; got != "containerd://a/0/running" {
		t.Errorf("ContainerID = %q", got)
	}
	if st.PodIP != "10.0.0.1" || len(st.PodIPs) != 1 || st.HostIP != "10.0.0.1" {
		t.Errorf("a host-network pod's IPs: pod %q %v, host %q", st.PodIP, st.PodIPs, st.HostIP)
	}
	if st.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("QOSClass = %s, want BestEffort", st.QOSClass)
	}
}

// A pod with its own network reports its running sandbox's IPs, the first as podIP;
// none while its sandbox is not running, or when the sandbox has none (no pod network).
func TestStatusPodIPs(t *testing.T) {
	pod := planPod(corev1.RestartPolicyAlways, false, nil, "a")
	withIPs := func(c Container, ips ...string) Container { c.IPs = ips; return c }
	tests := []struct {
		name string
		rt   []Container
		want []string
	}{
		{"no sandbox yet", nil, nil},
		{"one IP", []Container{withIPs(sandbox(0, StateRunning, 0), "10.88.0.5")}, []string{"10.88.0.5"}},
		{"dual stack", []Container{withIPs(sandbox(0, StateRunning, 0), "10.88.0.5", "fd88::5")}, []string{"10.88.0.5", "fd88::5"}},
		{"loopback only", []Container{sandbox(0, StateRunning, 0)}, nil},
		{"sandbox ended", []Container{withIPs(sandbox(0, StateExited, 0), "10.88.0.5")}, nil},
		{"the newest sandbox's", []Container{withIPs(sandbox(0, StateExited, 0), "10.88.0.5"), withIPs(sandbox(1, StateRunning, 1), "10.88.0.9")}, []string{"10.88.0.9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Status(pod, podRuntimeOf(pod, func(*corev1.Pod) []Container { return tt.rt }), Observed{}, "192.0.2.2")
			var got []string
			for _, ip := range st.PodIPs {
				got = append(got, ip.IP)
			}
			wantFirst := ""
			if len(tt.want) > 0 {
				wantFirst = tt.want[0]
			}
			if !slices.Equal(got, tt.want) || st.PodIP != wantFirst {
				t.Errorf("Status: podIP %q podIPs %v, want %q %v", st.PodIP, got, wantFirst, tt.want)
			}
		})
	}
}
