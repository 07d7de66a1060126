package runner

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The pod's host side (cgroup, directory, volumes) is prepared once per sync, before
// the sandbox or the first container that sync creates, as the kubelet makes a pod's
// cgroup and mounts its volumes before it asks its runtime for them.
func TestPodIsPreparedOnceBeforeTheContainersASyncCreates(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "two", "sleep 1d", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	second := pod.Spec.Containers[0]
	second.Name = "d"
	pod.Spec.Containers = append(pod.Spec.Containers, second)
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	var got []string
	for _, c := range h.f.callsOf() {
		if c == "PreparePod" || c == "CreateContainer" {
			got = append(got, c)
		}
	}
	if want := []string{"PreparePod", "CreateContainer", "CreateContainer"}; !slices.Equal(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
	h.sync(w) // nothing to create: nothing to prepare
	if n := h.f.count("PreparePod"); n != 1 {
		t.Errorf("PreparePod called %d times after a sync that created nothing, want 1", n)
	}
}

// What PreparePod resolved of the pod is what its sandbox and container are made with,
// as the kubelet hands the sandbox config it resolved once per sync to each creation.
func TestPodIsPreparedBeforeItsSandbox(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "net", "sleep 1d", corev1.RestartPolicyAlways)
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	var got []string
	for _, c := range h.f.callsOf() {
		if c == "PreparePod" || c == "StartSandbox" || c == "CreateContainer" {
			got = append(got, c)
		}
	}
	if want := []string{"PreparePod", "StartSandbox", "CreateContainer"}; !slices.Equal(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
	want := PodConfig{Dir: "prepared/" + string(pod.UID), Hostname: pod.Name}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if len(h.f.sandboxConfigs) != 1 || h.f.sandboxConfigs[0] != want {
		t.Errorf("sandboxes made with %+v, want %+v", h.f.sandboxConfigs, want)
	}
	if len(h.f.creates) != 1 || h.f.creates[0].Config != want {
		t.Errorf("container created with %+v, want %+v", h.f.creates, want)
	}
}

// A pod whose host side cannot be prepared creates no container: the container waits
// with the error, as a failed creation does, and is tried again after its back-off.
func TestPodThatCannotBePreparedCreatesNothingAndRetries(t *testing.T) {
	h := newHarness(t)
	pod := testPod(t, "noprep", "sleep 1d", corev1.RestartPolicyAlways)
	pod.Spec.HostNetwork = true
	h.f.fail["PreparePod"] = fmt.Errorf("prepare pod default/noprep-n: %w", errors.New("no space left on device"))
	w := newWorker(h.r.workerDeps(), pod.UID, pod)
	h.sync(w)
	st := w.obs.Waiting["c"]
	if st.Reason != ReasonRunContainerError || st.Message != "prepare pod default/noprep-n: no space left on device" {
		t.Fatalf("waiting = %+v, want RunContainerError with the error", st)
	}
	if n := h.f.count("CreateContainer"); n != 0 {
		t.Fatalf("CreateContainer called %d times, want none", n)
	}
	h.f.fail["PreparePod"] = fmt.Errorf("prepare pod: %w: configMap cm not found", ErrCreateConfig)
	h.tick(pullBackoffMax)
	h.sync(w)
	if r := w.obs.Waiting["c"].Reason; r != ReasonCreateConfigError {
		t.Fatalf("waiting reason = %q, want CreateContainerConfigError", r)
	}
	delete(h.f.fail, "PreparePod")
	h.tick(pullBackoffMax)
	h.sync(w)
	if c := h.f.byName(pod.UID)["c/0"]; c.State != StateRunning {
		t.Fatalf("after the back-off the container is %v, want running", c.State)
	}
}
