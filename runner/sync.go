package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/action"
	"github.com/staticpod/staticpod/runner/events"
	"github.com/staticpod/staticpod/runner/pulling"
)

// Image pull back-off: after a failed pull the image is not tried again for 10 s,
// doubling to 5 min, as the kubelet backs off ImagePullBackOff.
const (
	pullBackoffInitial = 10 * time.Second
	pullBackoffMax     = 5 * time.Minute
	// orphanGrace is the grace period of containers whose pod spec is unknown (found in
	// the runtime with no manifest wanting them).
	orphanGrace = 30 * time.Second
	// minGraceAfterHook is what is left of the grace period for the stop signal however
	// long a preStop hook took, as on the kubelet.
	minGraceAfterHook = 2 * time.Second
)

// execute carries out a plan. It reports whether it changed anything in the runtime.
// Failures are recorded as waiting reasons and events and retried at the next sync;
// they never stop the worker.
func (w *worker) execute(ctx context.Context, pod *corev1.Pod, rt PodRuntime, a Actions) bool {
	acted := false
	if a.KillPod {
		if pod != nil && sandboxChanged(pod, rt) {
			w.log.Info("pod sandbox changed: the pod is killed and started again")
			w.normal("", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		}
		w.killPod(ctx, rt)
		acted = true
	}
	for _, c := range a.Kill {
		w.stop(ctx, c, w.gracePeriod(c), "Killing", "Stopping container "+c.Name)
		acted = true
	}
	for _, c := range a.Remove {
		if err := w.rt.RemoveContainer(ctx, c.ID); err != nil {
			w.log.Warn("remove container that never started", "container", c.Name, "id", c.ID, "err", err)
			return true // its replacement would take its ID: the next sync tries again
		}
		acted = true
	}
	for name, reason := range a.Waiting {
		w.obs.Waiting[name] = corev1.ContainerStateWaiting{Reason: reason, Message: w.backoffMessage(name, rt)}
	}
	if pod == nil || len(a.Start) == 0 && !a.CreateSandbox {
		return acted
	}
	b := &creation{sandbox: rt.Sandbox(), volumes: imageVolumePulls{}}
	if a.CreateSandbox {
		if w.waiting(w.starts, "") {
			return acted // the last sandbox failed: wait out its back-off
		}
		if !w.prepare(ctx, pod, a.Start, b) {
			return acted
		}
		sb, err := w.rt.StartSandbox(ctx, pod, b.config, a.SandboxAttempt)
		if err != nil {
			w.failed(w.starts, "")
			msg := fmt.Sprintf("Failed to create pod sandbox: %v", err)
			w.warn("", "FailedCreatePodSandBox", msg)
			w.sandboxFailed(pod, msg)
			return true
		}
		delete(w.starts, "")
		w.sandboxFailed(pod, "")
		w.noteNetwork(&sb)
		b.sandbox = &sb
		acted = true
	}
	if !NeedsSandbox(pod) {
		b.sandbox = nil
	}
	for _, s := range a.Start {
		started, changed := w.start(ctx, pod, s, b)
		acted = acted || changed
		if !started {
			break // later containers (the next init container, say) wait for the next sync
		}
	}
	return acted
}

// sandboxFailed makes every container of pod wait with msg, why its sandbox could not
// be made (a pod network that could not be set up, say), or forgets that reason once
// msg is "".
func (w *worker) sandboxFailed(pod *corev1.Pod, msg string) {
	for _, c := range allContainers(pod) {
		if msg != "" {
			w.obs.Waiting[c.Name] = corev1.ContainerStateWaiting{Reason: ReasonCreatePodSandboxError, Message: msg}
		} else if w.obs.Waiting[c.Name].Reason == ReasonCreatePodSandboxError {
			delete(w.obs.Waiting, c.Name)
		}
	}
}

// noteNetwork tells, once per sandbox, why the pod has no pod network, when the runtime
// says.
func (w *worker) noteNetwork(sb *Container) {
	if sb == nil || sb.NetworkNote == "" || sb.ID == w.noted {
		return
	}
	w.noted = sb.ID
	w.normal("", "NoPodNetwork", sb.NetworkNote)
}

// killPod stops app containers first, then init containers and sidecars in reverse
// order, then the sandbox, as the kubelet terminates a pod.
func (w *worker) killPod(ctx context.Context, rt PodRuntime) {
	running := rt.Running()
	isApp := map[string]bool{}
	if w.spec != nil {
		for _, c := range w.spec.Spec.Containers {
			isApp[c.Name] = true
		}
	}
	var apps, others []Container
	for _, c := range running {
		if isApp[c.Name] || w.spec == nil {
			apps = append(apps, c)
		} else {
			others = append(others, c)
		}
	}
	var wg sync.WaitGroup
	for _, c := range apps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.stop(ctx, c, w.gracePeriod(c), "Killing", "Stopping container "+c.Name)
		}()
	}
	wg.Wait()
	for i := len(others) - 1; i >= 0; i-- {
		w.stop(ctx, others[i], w.gracePeriod(others[i]), "Killing", "Stopping container "+others[i].Name)
	}
	for _, sb := range rt.Sandboxes {
		if sb.State == StateRunning || sb.State == StateCreated {
			if err := w.rt.StopContainer(ctx, sb.ID, 0); err != nil {
				w.log.Warn("stop sandbox", "id", sb.ID, "err", err)
			}
		}
	}
}

// stop stops a container: its preStop hook first (within the grace period, which the
// hook's time counts against, leaving the kubelet's minimum of 2 s for the signal),
// then the stop signal, then SIGKILL once the grace period is over.
//
// The start of a stop is recorded with the runtime: before the hook, or beside the
// signal when there is no hook (so that the write does not delay the signal). A
// container whose stop an earlier staticpod began (it was stopped or killed meanwhile)
// gets what is left of that grace period, and its hook, which ran then, does not run
// twice; one killed before the record was written gets its whole grace period again.
func (w *worker) stop(ctx context.Context, c Container, grace time.Duration, reason, msg string) {
	w.normal(c.Name, reason, msg)
	hook := w.preStop(c)
	switch {
	case !c.StopDeadline.IsZero():
		grace = max(min(grace, c.StopDeadline.Sub(w.now())), 0)
		hook = nil
	case grace > 0 && c.State == StateRunning:
		begin := func() {
			if err := w.rt.BeginStop(ctx, c.ID, w.now().Add(grace)); err != nil {
				w.log.Warn("record the start of a stop", "container", c.Name, "err", err)
			}
		}
		if hook != nil {
			begin()
			break
		}
		recorded := make(chan struct{})
		go func() { defer close(recorded); begin() }()
		defer func() { <-recorded }()
	}
	if hook != nil && c.State == StateRunning && grace > 0 {
		start := w.now()
		hctx, cancel := context.WithTimeout(ctx, grace)
		err := runAction(hctx, w.rt, target{pod: w.spec, container: hook, id: c.ID, sandbox: w.sandbox}, action.Hook(hook.Lifecycle.PreStop))
		cancel()
		if err != nil {
			w.warn(c.Name, "FailedPreStopHook", fmt.Sprintf("PreStopHook failed: %v", err))
		}
		grace = max(grace-w.now().Sub(start), minGraceAfterHook)
	}
	if err := w.rt.StopContainer(ctx, c.ID, grace); err != nil {
		w.warn(c.Name, "FailedKillContainer", fmt.Sprintf("Failed to stop container %s: %v", c.Name, err))
	}
}

// preStop is the container's spec if it has a preStop hook: from the pod's spec, else
// as the runtime recorded it (the pod's spec is gone), else nil.
func (w *worker) preStop(c Container) *corev1.Container {
	spec := w.containerSpec(c.Name)
	if spec == nil {
		spec = c.PreStop
	}
	if spec == nil || spec.Lifecycle == nil || spec.Lifecycle.PreStop == nil {
		return nil
	}
	return spec
}

// start pulls, creates and starts one container: the images of the image volumes it
// mounts first (b holds what this sync pulled of them), then its own; the first
// container a sync creates has the pod's host side prepared before it. It reports
// whether the container started, and whether the runtime changed (a container was
// created) either way.
func (w *worker) start(ctx context.Context, pod *corev1.Pod, s Start, b *creation) (started, changed bool) {
	c := s.Container
	if w.waiting(w.starts, c.Name) {
		return false, false // its last start failed: wait out the back-off
	}
	vols, ok := w.pullVolumes(ctx, pod, c, b.volumes)
	if !ok {
		return false, false
	}
	img, ok := w.pull(ctx, pod, c)
	if !ok {
		return false, false
	}
	w.obs.Waiting[c.Name] = corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}
	if !w.prepare(ctx, pod, []Start{s}, b) {
		return false, false
	}
	devs, err := w.devices.Container(ctx, pod.UID, c.Name) // PreStartContainer where a plugin asks for it
	if err != nil {
		w.createFailed(c, err)
		return false, false
	}
	created, err := w.rt.CreateContainer(ctx, CreateRequest{
		Pod: pod, Config: b.config, Container: c, Init: s.Init, Attempt: s.Attempt, Hash: manifests.ContainerHash(c),
		Sandbox: b.sandbox, Image: img, ImageVolumes: vols, Objects: w.pub.objectsOf(pod), Devices: devs,
	})
	if err != nil {
		w.createFailed(c, err)
		return false, false
	}
	if s.Attempt > 0 {
		w.backoffs.Restarted(pod.UID, c.Name)
	}
	w.normal(c.Name, "Created", "Created container "+c.Name)
	if err := w.rt.StartContainer(ctx, created.ID); err != nil {
		w.obs.Waiting[c.Name] = corev1.ContainerStateWaiting{Reason: ReasonRunContainerError, Message: err.Error()}
		w.warn(c.Name, "Failed", fmt.Sprintf("Error: %v", err))
		w.failed(w.starts, c.Name)
		// A container that never started is of no use for logs or status.
		if err := w.rt.RemoveContainer(ctx, created.ID); err != nil {
			w.log.Warn("remove container that failed to start", "container", c.Name, "id", created.ID, "err", err)
		}
		return false, true
	}
	delete(w.starts, c.Name)
	delete(w.obs.Waiting, c.Name)
	w.normal(c.Name, "Started", "Started container "+c.Name)
	w.log.Info("container started", "container", c.Name, "attempt", s.Attempt, "id", created.ID)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		return w.postStart(ctx, pod, c, created, b.sandbox), true
	}
	return true, true
}

// retry is the back-off of an operation that failed: a pull, a sandbox, a start.
type retry struct {
	until time.Time
	delay time.Duration
}

// failed doubles the back-off of key (10 s to 5 min) from now.
func (w *worker) failed(retries map[string]retry, key string) {
	b := retries[key]
	b.delay = min(max(2*b.delay, pullBackoffInitial), pullBackoffMax)
	b.until = w.now().Add(b.delay)
	retries[key] = b
}

// waiting reports whether key is still backing off, and if so sets the alarm for its
// end.
func (w *worker) waiting(retries map[string]retry, key string) bool {
	b, ok := retries[key]
	if !ok {
		return false
	}
	left := b.until.Sub(w.now())
	if left > 0 {
		w.wakeIn(left)
	}
	return left > 0
}

// creation is what the containers one sync creates share: the pod's sandbox, the
// images of image volumes pulled so far, and whether the pod's host side is prepared,
// with what the runtime resolved of the pod then.
type creation struct {
	sandbox  *Container
	volumes  imageVolumePulls
	prepared bool
	config   PodConfig
}

// prepare makes the pod's host side (Runtime.PreparePod) once per sync, before its
// sandbox or the first container the sync creates. A failure is the first container's
// to start, as a failed creation (createFailed), or the pod's without one; either waits
// out its back-off before the next try.
func (w *worker) prepare(ctx context.Context, pod *corev1.Pod, starts []Start, b *creation) bool {
	if b.prepared {
		return true
	}
	key := ""
	if len(starts) > 0 {
		key = starts[0].Container.Name
	}
	if w.waiting(w.starts, key) {
		return false
	}
	cfg, err := w.rt.PreparePod(ctx, pod, w.pub.objectsOf(pod))
	switch {
	case err == nil:
		b.prepared, b.config = true, cfg
		return true
	case key != "":
		w.createFailed(starts[0].Container, err)
	default:
		w.warn("", "Failed", fmt.Sprintf("Error: %v", err))
		w.failed(w.starts, key)
	}
	return false
}

// createFailed records that container c could not be created: it waits with the
// reason (CreateContainerConfigError for what its manifest or objects get wrong) and
// starts again after a back-off.
func (w *worker) createFailed(c *corev1.Container, err error) {
	reason := ReasonRunContainerError
	if errors.Is(err, ErrCreateConfig) {
		reason = ReasonCreateConfigError
	}
	w.obs.Waiting[c.Name] = corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}
	w.warn(c.Name, "Failed", fmt.Sprintf("Error: %v", err))
	w.failed(w.starts, c.Name)
}

// postStart runs the container's postStart hook; the container does not count as
// started until it returns, and a failure kills it (the restart policy decides what
// follows).
func (w *worker) postStart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, created Container, sandbox *Container) bool {
	hctx, cancel := context.WithTimeout(ctx, podGrace(pod)+time.Minute)
	defer cancel()
	err := runAction(hctx, w.rt, target{pod: pod, container: c, id: created.ID, sandbox: sandbox}, action.Hook(c.Lifecycle.PostStart))
	if err == nil {
		return true
	}
	msg := fmt.Sprintf("PostStartHook failed: %v", err)
	w.warn(c.Name, "FailedPostStartHook", msg)
	w.killReasons[created.ID] = msg
	created.State = StateRunning
	w.stop(ctx, created, podGrace(pod), "Killing", fmt.Sprintf("FailedPostStartHook: stopping container %s", c.Name))
	return false
}

// containerSpec finds a container of the worker's pod by name.
func (w *worker) containerSpec(name string) *corev1.Container {
	if w.spec == nil {
		return nil
	}
	for _, c := range allContainers(w.spec) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// pull makes the container's image present, with the pod's pull secrets, backing off
// after failures.
func (w *worker) pull(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (Image, bool) {
	img, waiting := w.ensureImage(ctx, pod, c.Name, c.Image, c.ImagePullPolicy)
	if waiting != nil {
		w.obs.Waiting[c.Name] = *waiting
		return Image{}, false
	}
	return img, true
}

// ensureImage makes image present with policy and the pod's pull secrets, backing off
// after failures (by image, whoever asked for it), and tells of it in events about
// container ("" for the pod). It returns the image, or why a container that needs it
// waits.
func (w *worker) ensureImage(ctx context.Context, pod *corev1.Pod, container, image string, policy corev1.PullPolicy) (Image, *corev1.ContainerStateWaiting) {
	if w.waiting(w.pulls, image) {
		return Image{}, &corev1.ContainerStateWaiting{Reason: ReasonImagePullBackOff, Message: fmt.Sprintf("Back-off pulling image %q", image)}
	}
	start := time.Now()
	img, err := w.rt.EnsureImage(ctx, PullRequest{Image: image, Policy: policy, Secrets: w.pullSecrets(pod), Progress: w.pullProgress(pod, container, image)})
	w.metrics.pullDuration.Observe(time.Since(start).Seconds())
	if err != nil && ctx.Err() != nil { // given up (a newer revision, a shutdown): no failure to tell
		return Image{}, &corev1.ContainerStateWaiting{Reason: ReasonErrImagePull, Message: err.Error()}
	}
	if err != nil {
		w.failed(w.pulls, image)
		reason := ReasonErrImagePull
		if errors.Is(err, ErrImageNeverPull) {
			reason = ReasonErrImageNeverPull
		}
		w.warn(container, "Failed", fmt.Sprintf("Failed to pull image %q: %v", image, err))
		return Image{}, &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}
	}
	delete(w.pulls, image)
	if img.Pulled {
		took := time.Since(start).Truncate(time.Millisecond) // no queue: the pull is all the waiting
		w.normal(container, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.", image, took, took, img.Size))
	} else {
		w.normal(container, "Pulled", fmt.Sprintf("Container image %q already present on machine", image))
	}
	return img, nil
}

// pullProgress publishes how far a pull of image for container is (runner/pulling), from
// the pull's goroutine: it reads nothing the worker changes.
func (w *worker) pullProgress(pod *corev1.Pod, container, image string) func(wire.PullProgress) {
	obs, hostIP := Observed{RuntimeType: w.rt.Type()}, w.hostIP
	base := func() *corev1.Pod {
		out := pod.DeepCopy()
		out.Status = Status(pod, PodRuntime{}, obs, hostIP)
		return out
	}
	return func(p wire.PullProgress) {
		w.pub.setUnsynced(w.uid, base, func(cur *corev1.Pod) *corev1.Pod { return pulling.Show(cur, container, image, p) })
	}
}

func (w *worker) backoffMessage(name string, rt PodRuntime) string {
	last := rt.Latest(name)
	if last == nil {
		return ""
	}
	wait := w.backoffs.Wait(w.uid, name, last.StartedAt, last.FinishedAt, w.now())
	return fmt.Sprintf("back-off %v restarting failed container=%s pod=%s", wait.Round(time.Second), name, podRef(w.spec))
}

func (w *worker) normal(container, reason, msg string) {
	w.events.Add(events.Record{UID: w.uid, Pod: podRef(w.spec), Container: container, Type: events.Normal, Reason: reason, Message: msg})
}

func (w *worker) warn(container, reason, msg string) {
	w.log.Warn(msg, "container", container, "reason", reason)
	w.events.Add(events.Record{UID: w.uid, Pod: podRef(w.spec), Container: container, Type: events.Warning, Reason: reason, Message: msg})
}

func podRef(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	return manifests.Key(pod)
}

// gracePeriod is how long c may take to stop: its pod's termination grace period, from
// the pod's spec, else as recorded with the container, else orphanGrace.
func (w *worker) gracePeriod(c Container) time.Duration {
	g := podGrace(w.spec)
	if w.spec == nil && c.PodGrace != nil {
		g = *c.PodGrace
	}
	if w.maxGrace > 0 {
		g = min(g, w.maxGrace)
	}
	return g
}

// podGrace is the pod's termination grace period, or orphanGrace when its spec is not
// known.
func podGrace(pod *corev1.Pod) time.Duration {
	if pod == nil || pod.Spec.TerminationGracePeriodSeconds == nil {
		return orphanGrace
	}
	return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
}
