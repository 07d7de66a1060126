package runner

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/backoff"
	"github.com/staticpod/staticpod/runner/devices"
	"github.com/staticpod/staticpod/runner/events"
	"github.com/staticpod/staticpod/runner/results"
)

// worker owns one pod UID: it plans and executes the pod's sync, one at a time, in its
// own goroutine, so that a slow pull or a long grace period never holds up other pods
// or the sync loop.
type worker struct {
	workerDeps // its log is the worker's own, with the pod's uid and name
	uid        types.UID

	inbox chan struct{} // one slot: a pending signal to sync

	mu   sync.Mutex  // guards pod, kill and arrived, written by the loop and read by the worker
	pod  *corev1.Pod // the newest desired spec; an undelivered one is replaced
	kill bool        // the pod is no longer wanted; never undone
	// arrived are images that came without a pull since the last sync (see
	// Runner.ImagesArrived): their pull back-offs end.
	arrived []func(image string) bool

	// Owned by the worker goroutine.
	spec          *corev1.Pod // the last spec it synced, kept for the grace period of a kill
	created       time.Time   // when the worker was made: the pod first seen, for the start latency
	startKnown    bool        // obs.StartTime is the pod's start: what the runtime remembers (podStart), or, for a pod removed and wanted again, when this worker was made (loop.removed)
	sandbox       *Container  // the pod's running sandbox at the last sync, for hooks
	noted         string      // the sandbox whose NetworkNote the events told
	listed        bool        // the pod had a status published (setUnsynced) before its first sync acted
	obs           Observed
	synced        uint64            // PLEG generation when its last actions ended
	pulls         map[string]retry  // by image
	starts        map[string]retry  // by container name, and "" for the sandbox
	startRecorded bool              // the pod's start latency was observed
	killReasons   map[string]string // container ID -> why staticpod killed it (a failed probe)
	alarm         *time.Timer       // signals the worker when the soonest back-off ends
	alarmAt       time.Time         // when alarm fires
	volumes       string            // fingerprint of the objects last synced into its volumes
	volumesGen    uint64            // the published objectsGen when they were
	volumesSynced bool              // volumes holds a sync that worked
	mountErr      string            // the last volume sync's error, told once
	maxGrace      time.Duration     // caps the grace period of a kill when > 0 (StopForShutdown)
}

// workerDeps are the parts of the runner a pod worker uses, the same for every worker.
type workerDeps struct {
	rt       Runtime
	pub      *published      // where it publishes the pod's status; its source's objects
	pleg     *PLEG           // the cache it plans from
	asks     *relistRequests // where it asks for a relist newer than its actions
	prober   *prober
	backoffs *backoff.Table
	results  *results.Store
	events   *events.Store
	metrics  *metrics
	log      *slog.Logger
	now      func() time.Time
	hostIP   string // reported as status.hostIP
	devices  *devices.Manager
	busy     func() // Options.Busy, or nothing
}

// workerDeps returns what a worker uses of r's parts.
func (r *Runner) workerDeps() workerDeps {
	return workerDeps{
		rt: r.rt, pub: r.pub, pleg: r.pleg, asks: r.asks, prober: r.prober, backoffs: r.backoffs, results: r.results,
		events: r.events, metrics: r.metrics, log: r.log, now: r.now, hostIP: r.opts.HostIP, devices: r.opts.Devices,
		busy: r.opts.Busy,
	}
}

// wakeIn makes sure the worker syncs again within d, so that a back-off is acted on
// the moment it ends rather than at the next relist. An earlier alarm stays.
func (w *worker) wakeIn(d time.Duration) {
	at := time.Now().Add(d)
	if w.alarm != nil && !w.alarmAt.After(at) && w.alarmAt.After(time.Now()) {
		return
	}
	if w.alarm != nil {
		w.alarm.Stop()
	}
	w.alarmAt = at
	w.alarm = time.AfterFunc(d, w.signal)
}

func newWorker(d workerDeps, uid types.UID, pod *corev1.Pod) *worker {
	w := &worker{
		workerDeps: d, uid: uid, pod: pod, spec: pod, created: d.now(),
		inbox:  make(chan struct{}, 1),
		pulls:  map[string]retry{},
		starts: map[string]retry{},

		killReasons: map[string]string{},
		obs:         Observed{Waiting: map[string]corev1.ContainerStateWaiting{}, StartTime: d.now(), RuntimeType: d.rt.Type()},
	}
	w.log = d.log.With("uid", uid)
	if pod != nil {
		w.log = w.log.With("pod", manifests.Key(pod))
	} else {
		w.kill = true // an orphan: its pod is not wanted
	}
	return w
}

// update gives the worker a newer spec of its pod; it does nothing once the pod is
// being killed.
func (w *worker) update(pod *corev1.Pod) {
	w.mu.Lock()
	if !w.kill {
		w.pod = pod
	}
	w.mu.Unlock()
	w.signal()
}

// imagesArrived ends the pull back-offs of the images provides reports present, at the
// worker's next sync, which it asks for.
func (w *worker) imagesArrived(provides func(image string) bool) {
	w.mu.Lock()
	w.arrived = append(w.arrived, provides)
	w.mu.Unlock()
	w.signal()
}

// killed reports whether the worker's pod is being removed.
func (w *worker) killed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kill
}

// terminate tells the worker to stop and remove its pod. A pending kill is never
// overwritten by a later update.
func (w *worker) terminate() {
	w.mu.Lock()
	w.kill = true
	w.mu.Unlock()
	w.signal()
}

func (w *worker) signal() {
	select {
	case w.inbox <- struct{}{}:
	default: // a sync is already pending; it will read the newest state
	}
}

// run syncs the pod whenever signalled until the pod is gone (it returns true then) or
// ctx is done.
func (w *worker) run(ctx context.Context) (gone bool) {
	for {
		select {
		case <-ctx.Done():
			w.stopAlarm()
			return false
		case <-w.inbox:
		}
		if w.syncOnce(ctx) {
			w.stopAlarm()
			return true
		}
	}
}

func (w *worker) stopAlarm() {
	if w.alarm != nil {
		w.alarm.Stop()
	}
}

// syncOnce runs one sync, turning a panic into a sync error so that one bad pod
// cannot take the runner down.
func (w *worker) syncOnce(ctx context.Context) (gone bool) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("pod sync panicked", "panic", p, "stack", string(debug.Stack()))
			w.events.Add(events.Record{UID: w.uid, Type: events.Warning, Reason: "FailedSync", Message: fmt.Sprint("sync panicked: ", p)})
			gone = false
		}
	}()
	w.mu.Lock()
	pod, kill, arrived := w.pod, w.kill, w.arrived
	w.arrived = nil
	w.mu.Unlock()
	for image := range w.pulls {
		for _, provides := range arrived {
			if provides(image) {
				delete(w.pulls, image)
				break
			}
		}
	}
	if kill {
		pod = nil
	} else {
		w.spec = pod
	}
	rt, gen := w.pleg.Pod(w.uid)
	if gen == 0 || gen <= w.synced {
		// The cache predates our last actions (or there is none yet, and the runtime may
		// hold containers to adopt): acting on it could repeat them. Ask for a relist;
		// its result signals us again.
		w.asks.request(w.uid)
		return false
	}
	now := w.now()
	defer func(start time.Time) { w.metrics.syncDuration.Observe(time.Since(start).Seconds()) }(time.Now())
	if !w.startKnown {
		// A pod adopted after a restart of staticpod started when its first instance
		// did, not now: its active deadline counts from then.
		w.obs.StartTime, w.startKnown = podStart(rt, w.obs.StartTime), true
	}
	rt.Start = w.obs.StartTime
	w.sandbox = runningSandbox(rt)
	if pod != nil {
		w.noteNetwork(w.sandbox)
		if w.killUnhealthy(ctx, pod, rt) {
			w.synced = w.pleg.Started()
			w.asks.request(w.uid)
			return false
		}
		rt.Unstarted = w.unstarted(pod, rt)
	}
	actions := Plan(pod, rt, w.backoffs.Wait, now)
	if actions.Retry > 0 {
		w.wakeIn(actions.Retry)
	}
	if done, reason := w.results.Done(w.uid); done && pod != nil {
		actions = Actions{KillPod: actions.KillPod, Done: true}
		if reason != "" {
			w.obs.Reason = reason // told when the pod failed, before a restart of staticpod
		}
	} else {
		w.fail(actions.Reason)
	}
	if pod != nil && !w.listed {
		// The API lists the pod as it stands while its first sync acts, which may take
		// as long as a pull; the sync's own status follows.
		w.listed = true
		first := w.status(pod, rt)
		w.pub.setUnsynced(w.uid, func() *corev1.Pod { return first }, nil)
	}
	acted := w.execute(ctx, withStartTime(pod, w.obs.StartTime), rt, actions)
	if acted {
		w.busy()
		w.synced = w.pleg.Started()
		w.asks.request(w.uid)
	}
	if pod == nil {
		w.prober.stopPod(w.uid)
		return w.finishKill(ctx, rt, acted)
	}
	w.syncVolumes(ctx, pod, rt)
	w.prober.sync(w, pod, rt)
	w.obs.Done = actions.Done
	if actions.Done && !actions.KillPod {
		w.results.Mark(w.uid, w.obs.Reason)
	}
	w.publish(pod, rt)
	return false
}

// fail records that staticpod failed the pod for reason (none when ""), and tells it
// once, with the kubelet's event. The reason stays: a failed pod never runs again.
func (w *worker) fail(reason string) {
	if reason == "" || w.obs.Reason != "" {
		return
	}
	w.obs.Reason = reason
	w.log.Info("pod failed", "reason", reason)
	w.normal("", reason, failureMessages[reason])
}

// withStartTime is pod with its status.startTime set to start, for the runtime to
// record with what it makes of the pod (see Runtime.StartSandbox). pod itself, shared
// with the loop, is left as it is.
func withStartTime(pod *corev1.Pod, start time.Time) *corev1.Pod {
	if pod == nil {
		return nil
	}
	p := *pod
	p.Status.StartTime = &metav1.Time{Time: start}
	return &p
}

// finishKill removes everything of a killed pod once nothing of it runs any more. The
// pod counts as gone even if a removal fails, so that a pod waiting for its name is not
// held up: what is left is exited, and housekeeping tries again as for any orphan.
func (w *worker) finishKill(ctx context.Context, rt PodRuntime, acted bool) bool {
	if acted || len(rt.Live()) > 0 || sandboxRunning(rt) {
		return false // wait for the relist that shows it stopped
	}
	for _, c := range append(append([]Container{}, rt.Containers...), rt.Sandboxes...) {
		if err := w.rt.RemoveContainer(ctx, c.ID); err != nil {
			w.log.Warn("remove container; housekeeping retries", "container", c.Name, "id", c.ID, "err", err)
		}
	}
	if err := w.rt.RemovePodData(ctx, w.uid); err != nil {
		w.log.Warn("remove pod data", "err", err)
	}
	w.backoffs.Forget(w.uid)
	w.results.Forget(w.uid)
	w.log.Info("pod removed")
	return true
}

// publish computes the pod's status and makes it visible to the API.
func (w *worker) publish(pod *corev1.Pod, rt PodRuntime) {
	out := w.status(pod, rt)
	if !w.startRecorded && allRunning(out.Status) {
		w.startRecorded = true
		w.metrics.podStart.Observe(since(w.created, w.now()))
	}
	w.pub.setStatus(w.uid, out)
}

// status returns a copy of pod with the status rt and what the worker observed give it.
func (w *worker) status(pod *corev1.Pod, rt PodRuntime) *corev1.Pod {
	w.obs.Waiting = cleanWaiting(w.obs.Waiting, rt)
	w.obs.Unready = w.unready(pod, rt)
	w.obs.Unstarted = w.unstarted(pod, rt)
	w.obs.KillReasons = w.killReasons
	out := pod.DeepCopy()
	out.Status = Status(pod, rt, w.obs, w.hostIP)
	return out
}

// cleanWaiting forgets why containers waited once they run.
func cleanWaiting(waiting map[string]corev1.ContainerStateWaiting, rt PodRuntime) map[string]corev1.ContainerStateWaiting {
	for name := range waiting {
		if last := rt.Latest(name); last != nil && last.State == StateRunning {
			delete(waiting, name)
		}
	}
	return waiting
}

// allRunning reports whether every app container of a status is running.
func allRunning(st corev1.PodStatus) bool {
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return len(st.ContainerStatuses) > 0
}
