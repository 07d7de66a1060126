package runner

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

// PodRuntime is what the runtime holds for one pod: its sandboxes and its containers,
// every attempt that has not been collected yet.
type PodRuntime struct {
	UID        types.UID
	Sandboxes  []Container
	Containers []Container
	// Unstarted are the running containers whose startup probe has not succeeded yet:
	// a sidecar among them does not let the next init container start.
	Unstarted map[string]bool
	// Start is when the pod started (its status.startTime), from which its active
	// deadline counts; zero when not known.
	Start time.Time
}

// Sandbox is the pod's newest sandbox, or nil.
func (p PodRuntime) Sandbox() *Container { return newest(p.Sandboxes, "") }

// Latest is the newest attempt of the named container, or nil.
func (p PodRuntime) Latest(name string) *Container { return newest(p.Containers, name) }

func newest(cs []Container, name string) *Container {
	var best *Container
	for i := range cs {
		c := &cs[i]
		if name != "" && c.Name != name {
			continue
		}
		if best == nil || c.Attempt > best.Attempt {
			best = c
		}
	}
	return best
}

// Running are the containers (not sandboxes) that are created, running, or unknown
// (containerd could not tell): those that may hold a process.
func (p PodRuntime) Running() []Container {
	var out []Container
	for _, c := range p.Containers {
		if c.State == StateRunning || c.State == StateCreated || c.State == StateUnknown {
			out = append(out, c)
		}
	}
	return out
}

// Live are the containers (not sandboxes) that have a process, or may have one: those
// created and never started hold none, and stopping them is nothing to wait for.
func (p PodRuntime) Live() []Container {
	var out []Container
	for _, c := range p.Running() {
		if c.State != StateCreated || c.PID != 0 {
			out = append(out, c)
		}
	}
	return out
}

// neverStarted reports whether nothing of c ran: it is created and not started, or it
// stopped with no start recorded. The runtime records a start once the task started,
// and a relist records one for a running task whose staticpod was killed before it
// did; so an exited one without a start had its task stopped before it started, as
// containerd does to the task of a creation or start whose caller was killed. (The
// one exception: a process that exited within moments of a start whose staticpod was
// killed before recording it; it runs once more, uncounted.) Such an attempt is made
// again under its number (reuseUnstarted), whatever the restart policy: it neither
// failed nor succeeded.
func neverStarted(c *Container) bool {
	return c.State == StateCreated || c.State == StateExited && c.StartedAt.IsZero()
}

// Start is a container to create and start.
type Start struct {
	Container *corev1.Container
	Init      bool
	Attempt   int
}

// Actions is the plan for one pod: what to kill, what to create and start. The worker
// executes it in this order: KillPod (or Kill), Remove, CreateSandbox, Start.
type Actions struct {
	KillPod        bool              // stop and tear down every container and the sandbox first
	CreateSandbox  bool              // start a new sandbox (attempt SandboxAttempt)
	SandboxAttempt int               //
	Kill           []Container       // containers to stop (replaced, or no longer wanted)
	Remove         []Container       // never-started containers whose attempt a Start takes over
	Start          []Start           // containers to create and start, in order
	Waiting        map[string]string // container name -> why it is not started now (CrashLoopBackOff)
	Retry          time.Duration     // when > 0: the soonest back-off among Waiting ends, or the pod's active deadline passes, this much later
	Done           bool              // the pod has finished: nothing will run again
	Reason         string            // with Done, when staticpod fails the pod itself: why (DeadlineExceeded)
}

// Backoff says how long a container must still wait before it is restarted after the
// exit of its last attempt (started at startedAt, finished at finishedAt); 0 means it
// may restart now (backoff.Table.Wait).
type Backoff func(uid types.UID, name string, startedAt, finishedAt, now time.Time) time.Duration

// Plan computes what to do for pod given what the runtime holds for it. It does no I/O,
// so that every decision of the runner can be tested with tables. A nil pod means the
// pod is no longer wanted: everything is killed. A pod past its active deadline is
// killed and done, failed with ReasonDeadlineExceeded; one before it is planned as
// usual, with Retry no later than the deadline, so that its worker syncs then.
func Plan(pod *corev1.Pod, rt PodRuntime, backoff Backoff, now time.Time) Actions {
	if pod != nil && deadlineExceeded(pod, rt, now) {
		return Actions{KillPod: len(rt.Live()) > 0 || sandboxRunning(rt), Done: true, Reason: ReasonDeadlineExceeded}
	}
	a := plan(pod, rt, backoff, now)
	if a.Done || pod == nil {
		return a
	}
	if at, ok := activeDeadline(pod, rt.Start); ok {
		if left := at.Sub(now); a.Retry == 0 || left < a.Retry {
			a.Retry = left
		}
	}
	return a
}

func plan(pod *corev1.Pod, rt PodRuntime, backoff Backoff, now time.Time) Actions {
	if pod == nil {
		return Actions{KillPod: len(rt.Live()) > 0 || sandboxRunning(rt), Done: true}
	}
	if finished(pod, rt.sinceSandbox()) {
		// nothing will run again: stop what is left (sidecars, the sandbox)
		return Actions{KillPod: len(rt.Live()) > 0 || sandboxRunning(rt), Done: true}
	}
	if sb := rt.Sandbox(); sb != nil && sb.State == StateUnknown {
		return Actions{} // containerd could not tell (a slow shim): wait, never tear a pod down on a guess
	}
	if NeedsSandbox(pod) && !sandboxRunning(rt) || sandboxChanged(pod, rt) {
		a := planSandbox(pod, rt)
		reuseUnstarted(&a, rt)
		return a
	}
	p := planner{pod: pod, all: rt, cur: rt.sinceSandbox(), backoff: backoff, now: now}
	p.a.Waiting = map[string]string{}
	if p.init() {
		p.apps()
	}
	reuseUnstarted(&p.a, rt)
	return p.a
}

// reuseUnstarted gives a container to start the attempt number of its newest attempt
// when that one never started, and has that one removed first instead of stopped. Such
// an attempt is what a staticpod killed between create and start leaves: nothing of it
// ran, so the restart count, which is the attempt number, must not count it.
func reuseUnstarted(a *Actions, all PodRuntime) {
	for i, s := range a.Start {
		last := all.Latest(s.Container.Name)
		if last == nil || !neverStarted(last) || s.Attempt != last.Attempt+1 {
			continue
		}
		a.Start[i].Attempt = last.Attempt
		a.Remove = append(a.Remove, *last)
		a.Kill = slices.DeleteFunc(a.Kill, func(k Container) bool { return k.ID == last.ID })
	}
}

// planner holds one Plan's inputs and its result.
type planner struct {
	pod     *corev1.Pod
	all     PodRuntime // every attempt, for numbering the next one
	cur     PodRuntime // the attempts made in the current sandbox, for deciding
	backoff Backoff
	now     time.Time
	a       Actions
}

// sinceSandbox keeps the containers created in the newest sandbox: after a sandbox is
// recreated, containers of the old one (init containers that succeeded there, say) no
// longer count.
func (p PodRuntime) sinceSandbox() PodRuntime {
	sb := p.Sandbox()
	if sb == nil {
		return p
	}
	out := PodRuntime{UID: p.UID, Sandboxes: p.Sandboxes, Unstarted: p.Unstarted, Start: p.Start}
	for _, c := range p.Containers {
		if !c.CreatedAt.Before(sb.CreatedAt) {
			out.Containers = append(out.Containers, c)
		}
	}
	return out
}

// finished reports whether every app container of pod has exited for good under the
// pod's restart policy (never for Always pods).
func finished(pod *corev1.Pod, rt PodRuntime) bool {
	if len(pod.Spec.Containers) == 0 {
		return false
	}
	for i := range pod.Spec.Containers {
		last := rt.Latest(pod.Spec.Containers[i].Name)
		if last == nil || last.State != StateExited || neverStarted(last) || shouldRestart(pod, last) {
			return false
		}
	}
	return true
}

func sandboxRunning(rt PodRuntime) bool {
	sb := rt.Sandbox()
	return sb != nil && sb.State == StateRunning
}

// sandboxChanged reports whether the pod's running sandbox was made from other fields
// of the pod than pod has now (manifests.SandboxHash): an edit of a pod whose manifest
// gives its UID changed, say, hostNetwork. A sandbox that recorded no hash, made by a
// staticpod before the hash existed, counts as unchanged, so that adopting it after an
// upgrade restarts nothing.
func sandboxChanged(pod *corev1.Pod, rt PodRuntime) bool {
	sb := rt.Sandbox()
	return sb != nil && sb.State == StateRunning && sb.Hash != "" && sb.Hash != manifests.SandboxHash(pod)
}

// planSandbox handles a pod whose sandbox is missing, dead or changed: everything is
// killed and restarts, init containers first, in a new sandbox (or in none, for a pod
// that needs none any longer), as on the kubelet. A Never pod whose containers already
// ran is not started again.
func planSandbox(pod *corev1.Pod, rt PodRuntime) Actions {
	a := Actions{KillPod: len(rt.Running()) > 0 || rt.Sandbox() != nil, Waiting: map[string]string{}}
	if pod.Spec.RestartPolicy == corev1.RestartPolicyNever && len(rt.Containers) > 0 {
		a.Done = true
		return a
	}
	if a.CreateSandbox = NeedsSandbox(pod); a.CreateSandbox {
		if sb := rt.Sandbox(); sb != nil {
			a.SandboxAttempt = sb.Attempt + 1
		}
	}
	if len(pod.Spec.InitContainers) > 0 {
		c := &pod.Spec.InitContainers[0]
		a.Start = append(a.Start, Start{Container: c, Init: true, Attempt: nextAttempt(rt, c.Name)})
		return a
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if last := rt.Latest(c.Name); last != nil && last.State == StateExited && !neverStarted(last) && !shouldRestart(pod, last) {
			continue // an OnFailure container that succeeded; one killed with the pod starts again
		}
		a.Start = append(a.Start, Start{Container: c, Attempt: nextAttempt(rt, c.Name)})
	}
	return a
}

func nextAttempt(rt PodRuntime, name string) int {
	if last := rt.Latest(name); last != nil {
		return last.Attempt + 1
	}
	return 0
}

// shouldRestart applies the pod's restart policy to a container that exited.
func shouldRestart(pod *corev1.Pod, last *Container) bool {
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return last.ExitCode != 0
	}
	return true
}

// init walks the init containers in order. It returns true when all of them are done
// (regular ones succeeded, sidecars started), so app containers may run.
func (p *planner) init() bool {
	pod, a := p.pod, &p.a
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		last := p.cur.Latest(c.Name)
		sidecar := manifests.IsSidecar(c)
		switch {
		case last == nil, neverStarted(last):
			a.Start = append(a.Start, Start{Container: c, Init: true, Attempt: nextAttempt(p.all, c.Name)})
			return false
		case stopBegun(last):
			a.Kill = append(a.Kill, *last)
			return false
		case last.State == StateRunning && (!sidecar || last.Hash == manifests.ContainerHash(c)):
			if !sidecar || p.cur.Unstarted[c.Name] {
				return false // a regular init container still works; a sidecar still starts
			}
		case last.State == StateRunning:
			a.Kill = append(a.Kill, *last) // a sidecar whose spec changed
			a.Start = append(a.Start, Start{Container: c, Init: true, Attempt: last.Attempt + 1})
			if !p.appsStarted() {
				return false
			}
		case last.State == StateExited && !sidecar && last.ExitCode == 0:
			// done
		case last.State == StateUnknown:
			return false // containerd could not tell: wait for it
		case last.State == StateExited && !sidecar && pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
			a.KillPod, a.Done = true, true // a failed init container fails a Never pod
			return false
		default: // exited (failed, or a sidecar that died), created but not started, unknown
			if last.State != StateExited {
				a.Kill = append(a.Kill, *last)
			}
			p.restart(c, true, *last)
			if !sidecar || !p.appsStarted() {
				return false
			}
			// a sidecar that dies once the app containers run is restarted beside them
		}
	}
	return true
}

// stopBegun reports whether c runs although a stop of it began (a failed probe's
// kill, interrupted by a restart of staticpod, or a stop that failed): the stop is
// finished, with what is left of its grace period, and the restart policy applies to
// the exit as to any other.
func stopBegun(c *Container) bool {
	return c.State == StateRunning && !c.StopDeadline.IsZero()
}

// appsStarted reports whether the pod's app containers have run in this sandbox, that
// is, whether the init phase was completed before.
func (p *planner) appsStarted() bool {
	for _, c := range p.pod.Spec.Containers {
		if p.cur.Latest(c.Name) != nil {
			return true
		}
	}
	return false
}

// restart starts the next attempt of c unless it is still backing off.
func (p *planner) restart(c *corev1.Container, init bool, last Container) {
	if p.backoff != nil && last.State == StateExited {
		if wait := p.backoff(p.pod.UID, c.Name, last.StartedAt, last.FinishedAt, p.now); wait > 0 {
			p.a.Waiting[c.Name] = "CrashLoopBackOff"
			if p.a.Retry == 0 || wait < p.a.Retry {
				p.a.Retry = wait
			}
			return
		}
	}
	p.a.Start = append(p.a.Start, Start{Container: c, Init: init, Attempt: nextAttempt(p.all, c.Name)})
}

// apps starts, restarts and replaces app containers, and finishes the pod when none of
// them will run again.
func (p *planner) apps() {
	pod, a := p.pod, &p.a
	finished := true
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		last := p.cur.Latest(c.Name)
		switch {
		case last == nil, neverStarted(last):
			a.Start = append(a.Start, Start{Container: c, Attempt: nextAttempt(p.all, c.Name)})
			finished = false
		case stopBegun(last):
			a.Kill = append(a.Kill, *last)
			finished = false
		case last.State == StateRunning && last.Hash == manifests.ContainerHash(c):
			finished = false
		case last.State == StateUnknown:
			finished = false // containerd could not tell: wait for it
		case last.State == StateRunning || last.State == StateCreated:
			// adopted with another spec, or left half-made: replace it
			a.Kill = append(a.Kill, *last)
			a.Start = append(a.Start, Start{Container: c, Attempt: nextAttempt(p.all, c.Name)})
			finished = false
		case shouldRestart(pod, last):
			p.restart(c, false, *last)
			finished = false
		}
	}
	if finished && len(pod.Spec.Containers) > 0 {
		// sidecars and the sandbox stop once the app containers are done
		p.a = Actions{KillPod: true, Done: true}
	}
}
