package runner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// planPod is a defaulted pod with the given init and app container names; an init name
// starting with "side" is a sidecar.
func planPod(policy corev1.RestartPolicy, hostNetwork bool, inits []string, apps ...string) *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: policy, HostNetwork: hostNetwork}}
	pod.UID = "uid"
	for _, n := range inits {
		c := corev1.Container{Name: n, Image: "busybox:1"}
		if strings.HasPrefix(n, "side") {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	for _, n := range apps {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "busybox:1"})
	}
	manifests.Default(pod)
	return pod
}

// ctr is a container record of pod: "name/attempt/state[/exit]", created at minute m.
func ctr(pod *corev1.Pod, spec string, m int) Container {
	var name, state string
	var attempt, exit int
	parts := strings.Split(spec, "/")
	name, state = parts[0], parts[2]
	fmt.Sscan(parts[1], &attempt)
	if len(parts) > 3 {
		fmt.Sscan(parts[3], &exit)
	}
	c := Container{ID: spec, Kind: KindContainer, PodUID: pod.UID, Name: name, Attempt: attempt, State: State(state), ExitCode: int32(exit), CreatedAt: t0.Add(time.Duration(m) * time.Minute)}
	if c.State != StateCreated {
		c.StartedAt = c.CreatedAt.Add(time.Second) // it ran: its start is recorded
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				c.Hash = manifests.ContainerHash(&list[i])
			}
		}
	}
	return c
}

func sandbox(attempt int, state State, m int) Container {
	return Container{ID: fmt.Sprintf("sb/%d", attempt), Kind: KindSandbox, Attempt: attempt, State: state, CreatedAt: t0.Add(time.Duration(m) * time.Minute)}
}

// madeFrom gives sandbox sb the hash of the pod fields it was made from: "" for one
// made before staticpod recorded it.
func madeFrom(sb Container, hash string) Container {
	sb.Hash = hash
	return sb
}

// podRuntimeOf sorts the records rt makes for pod (none when rt is nil) into a
// PodRuntime, as the PLEG's cache holds them.
func podRuntimeOf(pod *corev1.Pod, rt func(*corev1.Pod) []Container) PodRuntime {
	var out PodRuntime
	if rt == nil {
		return out
	}
	for _, c := range rt(pod) {
		if c.Kind == KindSandbox {
			out.Sandboxes = append(out.Sandboxes, c)
		} else {
			out.Containers = append(out.Containers, c)
		}
	}
	return out
}

// summary renders Actions as a short string for table comparison.
func summary(a Actions) string {
	var parts []string
	if a.KillPod {
		parts = append(parts, "killpod")
	}
	for _, k := range a.Kill {
		parts = append(parts, "kill "+k.ID)
	}
	for _, r := range a.Remove {
		parts = append(parts, "remove "+r.ID)
	}
	if a.CreateSandbox {
		parts = append(parts, fmt.Sprintf("sandbox %d", a.SandboxAttempt))
	}
	for _, s := range a.Start {
		parts = append(parts, fmt.Sprintf("start %s/%d", s.Container.Name, s.Attempt))
	}
	for name, why := range a.Waiting {
		parts = append(parts, "wait "+name+" "+why)
	}
	if a.Done {
		parts = append(parts, "done")
	}
	return strings.Join(parts, ", ")
}

func TestPlan(t *testing.T) {
	always, onFailure, never := corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever
	noBackoff := Backoff(func(types.UID, string, time.Time, time.Time, time.Time) time.Duration { return 0 })
	inBackoff := Backoff(func(types.UID, string, time.Time, time.Time, time.Time) time.Duration { return time.Minute })
	tests := []struct {
		name    string
		pod     *corev1.Pod
		rt      func(pod *corev1.Pod) []Container
		backoff Backoff
		want    string
	}{
		{"new pod gets a sandbox and its containers", planPod(always, false, nil, "a", "b"), nil, noBackoff, "sandbox 0, start a/0, start b/0"},
		{"host-network pod needs no sandbox", planPod(always, true, nil, "a"), nil, noBackoff, "start a/0"},
		{"running pod is left alone", planPod(always, false, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{sandbox(0, StateRunning, 0), ctr(p, "a/0/running", 1)}
		}, noBackoff, ""},
		{"container with another spec hash is replaced", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			c := ctr(p, "a/4/running", 1)
			c.Hash = "old"
			return []Container{c}
		}, noBackoff, "kill a/4/running, start a/5"},
		{"exited container of an Always pod restarts", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "a/2/exited/0", 1)}
		}, noBackoff, "start a/3"},
		{"restart waits for its back-off", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "a/2/exited/1", 1)}
		}, inBackoff, "wait a CrashLoopBackOff"},
		{"OnFailure pod that succeeded is done and its sandbox stopped", planPod(onFailure, false, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{sandbox(0, StateRunning, 0), ctr(p, "a/0/exited/0", 1)}
		}, noBackoff, "killpod, done"},
		{"OnFailure pod that failed restarts", planPod(onFailure, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "a/0/exited/3", 1)}
		}, noBackoff, "start a/1"},
		{"Never pod that failed is done", planPod(never, true, nil, "a", "b"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "a/0/exited/3", 1), ctr(p, "b/0/exited/0", 1)}
		}, noBackoff, "done"},
		{"Never pod waits for its last container", planPod(never, true, nil, "a", "b"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "a/0/exited/3", 1), ctr(p, "b/0/running", 1)}
		}, noBackoff, ""},
		{"init containers run first, one at a time", planPod(always, true, []string{"i1", "i2"}, "a"), nil, noBackoff, "start i1/0"},
		{"a running init container blocks the next", planPod(always, true, []string{"i1", "i2"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "i1/0/running", 1)}
		}, noBackoff, ""},
		{"the next init container follows a success", planPod(always, true, []string{"i1", "i2"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "i1/0/exited/0", 1)}
		}, noBackoff, "start i2/0"},
		{"app containers start after every init container", planPod(always, true, []string{"i1", "i2"}, "a", "b"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "i1/0/exited/0", 1), ctr(p, "i2/0/exited/0", 2)}
		}, noBackoff, "start a/0, start b/0"},
		{"a failed init container is retried", planPod(always, true, []string{"i1"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "i1/0/exited/1", 1)}
		}, noBackoff, "start i1/1"},
		{"a failed init container fails a Never pod", planPod(never, false, []string{"i1"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{sandbox(0, StateRunning, 0), ctr(p, "i1/0/exited/1", 1)}
		}, noBackoff, "killpod, done"},
		{"a dead sandbox restarts the pod from its first init container", planPod(always, false, []string{"i1"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{sandbox(0, StateExited, 0), ctr(p, "i1/0/exited/0", 1), ctr(p, "a/3/running", 2)}
		}, noBackoff, "killpod, sandbox 1, start i1/1"},
		{"init containers of an old sandbox do not count", planPod(always, false, []string{"i1"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{sandbox(0, StateExited, 0), sandbox(1, StateRunning, 5), ctr(p, "i1/0/exited/0", 1), ctr(p, "a/3/exited/137", 2)}
		}, noBackoff, "start i1/1"},
		{"a Never pod whose sandbox died is not started again", planPod(never, false, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{sandbox(0, StateExited, 0), ctr(p, "a/0/exited/137", 1)}
		}, noBackoff, "done"},
		{"a sidecar is done once running", planPod(always, true, []string{"side", "i2"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "side/0/running", 1)}
		}, noBackoff, "start i2/0"},
		{"a sidecar that dies beside app containers restarts without blocking them", planPod(always, true, []string{"side"}, "a", "b"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "side/0/exited/1", 1), ctr(p, "a/0/running", 2), ctr(p, "b/0/exited/0", 2)}
		}, noBackoff, "start side/1, start b/1"},
		{"sidecars stop when the app containers are done", planPod(never, true, []string{"side"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "side/0/running", 1), ctr(p, "a/0/exited/0", 2)}
		}, noBackoff, "killpod, done"},
		{"a container containerd cannot tell about is waited on", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "a/3/unknown", 1)}
		}, noBackoff, ""},
		{"a sandbox containerd cannot tell about is waited on", planPod(always, false, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{sandbox(0, StateUnknown, 0), ctr(p, "a/0/running", 1)}
		}, noBackoff, ""},
		{"a sandbox made from other pod fields is replaced, every container restarting in the new one", planPod(always, false, nil, "a", "b"), func(p *corev1.Pod) []Container {
			return []Container{madeFrom(sandbox(0, StateRunning, 0), "old"), ctr(p, "a/0/running", 1), ctr(p, "b/2/running", 2)}
		}, noBackoff, "killpod, sandbox 1, start a/1, start b/3"},
		{"a pod edited onto the host network loses its sandbox and restarts without one", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{madeFrom(sandbox(0, StateRunning, 0), "old"), ctr(p, "a/0/running", 1)}
		}, noBackoff, "killpod, start a/1"},
		{"a changed sandbox restarts the pod from its first init container", planPod(always, false, []string{"i1", "i2"}, "a"), func(p *corev1.Pod) []Container {
			return []Container{madeFrom(sandbox(2, StateRunning, 0), "old"), ctr(p, "i1/0/exited/0", 1), ctr(p, "i2/0/exited/0", 2), ctr(p, "a/0/running", 3)}
		}, noBackoff, "killpod, sandbox 3, start i1/1"},
		{"an OnFailure container killed with its changed sandbox starts again, one that succeeded does not", planPod(onFailure, false, nil, "a", "b"), func(p *corev1.Pod) []Container {
			return []Container{madeFrom(sandbox(0, StateRunning, 0), "old"), ctr(p, "a/0/running", 1), ctr(p, "b/0/exited/0", 1)}
		}, noBackoff, "killpod, sandbox 1, start a/1"},
		{"a Never pod whose sandbox changed is killed and done, as on the kubelet", planPod(never, false, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{madeFrom(sandbox(0, StateRunning, 0), "old"), ctr(p, "a/0/running", 1)}
		}, noBackoff, "killpod, done"},
		{"a sandbox made from the pod's fields is kept", planPod(always, false, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{madeFrom(sandbox(0, StateRunning, 0), manifests.SandboxHash(p)), ctr(p, "a/0/running", 1)}
		}, noBackoff, ""},
		{"a sandbox that recorded no hash (an older staticpod's) is adopted as it is", planPod(always, false, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{madeFrom(sandbox(0, StateRunning, 0), ""), ctr(p, "a/0/running", 1)}
		}, noBackoff, ""},
		{"the stopped sandbox of a pod on the host network now is left alone", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{madeFrom(sandbox(0, StateExited, 0), "old"), ctr(p, "a/0/exited/137", 1), ctr(p, "a/1/running", 2)}
		}, noBackoff, ""},
		{"a removed pod is killed", nil, func(*corev1.Pod) []Container {
			return []Container{sandbox(0, StateRunning, 0)}
		}, noBackoff, "killpod, done"},
		{"a stop under way when staticpod restarted is finished", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			c := ctr(p, "a/2/running", 1)
			c.StopDeadline = t0.Add(time.Hour)
			return []Container{c}
		}, noBackoff, "kill a/2/running"},
		{"a sidecar's stop under way is finished too", planPod(always, true, []string{"side"}, "a"), func(p *corev1.Pod) []Container {
			c := ctr(p, "side/0/running", 1)
			c.StopDeadline = t0
			return []Container{c, ctr(p, "a/0/running", 2)}
		}, noBackoff, "kill side/0/running"},
		{"a container left half-made is replaced under its attempt: restarts count runs", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			return []Container{ctr(p, "a/2/exited/1", 1), ctr(p, "a/3/created", 2)}
		}, noBackoff, "remove a/3/created, start a/3"},
		{"one whose task was created and never started too", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			c := ctr(p, "a/0/created", 1)
			c.PID = 42
			return []Container{c}
		}, noBackoff, "remove a/0/created, start a/0"},
		{"one whose task stopped before any start (its creation cut short) too", planPod(always, true, nil, "a"), func(p *corev1.Pod) []Container {
			c := ctr(p, "a/0/exited/137", 1)
			c.StartedAt = time.Time{}
			return []Container{c}
		}, inBackoff, "remove a/0/exited/137, start a/0"},
		{"under any restart policy: it never ran, so it neither failed nor succeeded", planPod(never, true, nil, "a"), func(p *corev1.Pod) []Container {
			c := ctr(p, "a/0/exited/137", 1)
			c.StartedAt = time.Time{}
			return []Container{c}
		}, noBackoff, "remove a/0/exited/137, start a/0"},
		{"an init container's too", planPod(never, true, []string{"init"}, "a"), func(p *corev1.Pod) []Container {
			c := ctr(p, "init/0/exited/137", 1)
			c.StartedAt = time.Time{}
			return []Container{c}
		}, noBackoff, "remove init/0/exited/137, start init/0"},
		{"a removed pod's container that never started needs no stop", nil, func(*corev1.Pod) []Container {
			return []Container{{ID: "a/0", Kind: KindContainer, Name: "a", State: StateCreated}}
		}, noBackoff, "done"},
		{"a removed pod's container whose task was created is stopped", nil, func(*corev1.Pod) []Container {
			return []Container{{ID: "a/0", Kind: KindContainer, Name: "a", State: StateCreated, PID: 42}}
		}, noBackoff, "killpod, done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := podRuntimeOf(tt.pod, tt.rt)
			if got := summary(Plan(tt.pod, rt, tt.backoff, t0.Add(time.Hour))); got != tt.want {
				t.Errorf("Plan = %q, want %q", got, tt.want)
			}
		})
	}
}
