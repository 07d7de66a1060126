package devices_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/runner/devices"
	"github.com/staticpod/staticpod/runner/devices/plugintest"
)

const widget = "example.com/widget"

// harness is a manager serving in a temporary directory, with its checkpoint there.
type harness struct {
	t          *testing.T
	dir        string
	checkpoint string
	m          *devices.Manager
	stop       func()
}

func newHarness(t *testing.T, dir, checkpoint string) *harness {
	t.Helper()
	m, err := devices.New(devices.Config{Dir: dir, Checkpoint: checkpoint, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	h := &harness{t: t, dir: dir, checkpoint: checkpoint, m: m}
	h.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
	})
	return h
}

func startHarness(t *testing.T) *harness {
	dir := t.TempDir()
	return newHarness(t, dir, filepath.Join(dir, "checkpoint"))
}

// mustRegister starts a plugin of ids and waits until the manager has them healthy.
func (h *harness) mustRegister(p *plugintest.Plugin, healthy int) {
	h.t.Helper()
	if err := p.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(p.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case <-h.m.Serving():
	case <-ctx.Done():
		h.t.Fatal("kubelet.sock: not serving")
	}
	if err := p.Register(ctx); err != nil {
		h.t.Fatalf("register: %v", err)
	}
	h.awaitHealthy(p.Resource, healthy)
}

// awaitHealthy waits, on the manager's Changed, until n devices of res are healthy.
func (h *harness) awaitHealthy(res string, n int) {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for h.m.Healthy(res) != n {
		select {
		case <-h.m.Changed():
		case <-deadline:
			h.t.Fatalf("%s: %d healthy devices, want %d", res, h.m.Healthy(res), n)
		}
	}
}

func widgetPod(uid string, n int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metaUID(uid),
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{widget: *resource.NewQuantity(n, resource.DecimalSI)}},
		}}},
	}
}

func TestAdmitGivesTheContainerThePluginsAllocation(t *testing.T) {
	h := startHarness(t)
	p := plugintest.New(h.dir, widget, "widget.sock", "widget0", "widget1")
	p.PreStart = true
	h.mustRegister(p, 2)
	ctx := context.Background()
	pod := widgetPod("one", 1)
	if r := h.m.Admit(ctx, pod); r != nil {
		t.Fatalf("Admit = %+v, want admitted", r)
	}
	got, err := h.m.Container(ctx, pod.UID, "c")
	if err != nil {
		t.Fatal(err)
	}
	want := devices.Allocation{
		Devices: []devices.Device{{HostPath: "/dev/null", ContainerPath: "/dev/widget0", Permissions: "rw"}},
		Env:     map[string]string{plugintest.Env: "widget0"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Container (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"widget0"}}, p.PreStarted()); diff != "" {
		t.Errorf("PreStartContainer calls (-want +got):\n%s", diff)
	}
	if r := h.m.Admit(ctx, pod); r != nil || len(p.Allocated()) != 1 {
		t.Errorf("Admit again = %+v with %d Allocate calls, want admitted with 1", r, len(p.Allocated()))
	}
}

func TestAdmitRefusesMoreDevicesThanAreFreeUntilReleased(t *testing.T) {
	h := startHarness(t)
	h.mustRegister(plugintest.New(h.dir, widget, "widget.sock", "widget0", "widget1"), 2)
	ctx := context.Background()
	first, second := widgetPod("one", 1), widgetPod("two", 2)
	if r := h.m.Admit(ctx, first); r != nil {
		t.Fatalf("Admit(first) = %+v", r)
	}
	want := &devices.Refusal{Reason: "UnexpectedAdmissionError",
		Message: "Allocate failed due to requested number of devices unavailable for example.com/widget. Requested: 2, Available: 1, which is unexpected"}
	if diff := cmp.Diff(want, h.m.Admit(ctx, second)); diff != "" {
		t.Errorf("Admit(second) (-want +got):\n%s", diff)
	}
	h.m.Release(func(uid types.UID) bool { return uid == second.UID })
	if r := h.m.Admit(ctx, second); r != nil {
		t.Errorf("Admit(second) once first is released = %+v, want admitted", r)
	}
	if diff := cmp.Diff(map[string]map[string][]string{"c": {widget: {"widget0", "widget1"}}}, h.m.Assigned(second.UID)); diff != "" {
		t.Errorf("Assigned(second) (-want +got):\n%s", diff)
	}
}

func TestAdmitRefusesAResourceNoPluginRegistered(t *testing.T) {
	h := startHarness(t)
	want := &devices.Refusal{Reason: "UnexpectedAdmissionError",
		Message: "Allocate failed due to cannot allocate unregistered device example.com/widget, which is unexpected"}
	if diff := cmp.Diff(want, h.m.Admit(context.Background(), widgetPod("one", 1))); diff != "" {
		t.Errorf("Admit (-want +got):\n%s", diff)
	}
}

func TestAdmitTakesThePluginsPreferredDevices(t *testing.T) {
	h := startHarness(t)
	p := plugintest.New(h.dir, widget, "widget.sock", "widget0", "widget1", "widget2")
	p.Prefer = func(available []string, size int) []string { return available[len(available)-size:] }
	h.mustRegister(p, 3)
	pod := widgetPod("one", 2)
	if r := h.m.Admit(context.Background(), pod); r != nil {
		t.Fatalf("Admit = %+v", r)
	}
	if diff := cmp.Diff([][]string{{"widget1", "widget2"}}, p.Allocated()); diff != "" {
		t.Errorf("Allocate calls (-want +got):\n%s", diff)
	}
}

func TestAssignmentsSurviveARestartOfTheManager(t *testing.T) {
	h := startHarness(t)
	p := plugintest.New(h.dir, widget, "widget.sock", "widget0", "widget1")
	h.mustRegister(p, 2)
	ctx := context.Background()
	first := widgetPod("one", 1)
	if r := h.m.Admit(ctx, first); r != nil {
		t.Fatalf("Admit(first) = %+v", r)
	}
	h.stop()
	h.stop = nil

	again := newHarness(t, h.dir, h.checkpoint)
	again.mustRegister(p, 2) // the plugin registers again on the new kubelet.sock
	if r := again.m.Admit(ctx, first); r != nil {
		t.Errorf("Admit(first) after restart = %+v, want admitted", r)
	}
	if len(p.Allocated()) != 1 {
		t.Errorf("Allocate calls = %v, want the one before the restart", p.Allocated())
	}
	got, err := again.m.Container(ctx, first.UID, "c")
	if err != nil || got.Env[plugintest.Env] != "widget0" {
		t.Errorf("Container(first) after restart = %+v, %v; want widget0", got, err)
	}
	r := again.m.Admit(ctx, widgetPod("three", 2))
	if r == nil || r.Message != "Allocate failed due to requested number of devices unavailable for example.com/widget. Requested: 2, Available: 1, which is unexpected" {
		t.Errorf("Admit(third asking 2) after restart = %+v, want refused with 1 available", r)
	}
}

func TestAPluginThatRestartsRegistersAgain(t *testing.T) {
	h := startHarness(t)
	p := plugintest.New(h.dir, widget, "widget.sock", "widget0")
	h.mustRegister(p, 1)
	p.Stop()
	h.awaitHealthy(widget, 0)
	if r := h.m.Admit(context.Background(), widgetPod("one", 1)); r == nil {
		t.Fatal("Admit with the plugin gone: admitted, want refused")
	}
	p2 := plugintest.New(h.dir, widget, "widget.sock", "widget0")
	h.mustRegister(p2, 1)
	if r := h.m.Admit(context.Background(), widgetPod("one", 1)); r != nil {
		t.Errorf("Admit once the plugin registered again = %+v, want admitted", r)
	}
}

func TestUnhealthyDevicesAreNotGivenOut(t *testing.T) {
	h := startHarness(t)
	p := plugintest.New(h.dir, widget, "widget.sock", "widget0", "widget1")
	h.mustRegister(p, 2)
	p.SetHealth("widget0", false)
	h.awaitHealthy(widget, 1)
	pod := widgetPod("one", 1)
	if r := h.m.Admit(context.Background(), pod); r != nil {
		t.Fatalf("Admit = %+v", r)
	}
	if diff := cmp.Diff([][]string{{"widget1"}}, p.Allocated()); diff != "" {
		t.Errorf("Allocate calls (-want +got):\n%s", diff)
	}
}
