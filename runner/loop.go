package runner

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/devices"
	"github.com/staticpod/staticpod/runner/events"
	"github.com/staticpod/staticpod/runner/prepull"
	"github.com/staticpod/staticpod/runner/restrict"
	"github.com/staticpod/staticpod/runner/revisions"
)

// loop is the state the sync loop goroutine owns alone; it needs no mutex. What others
// read of it, it publishes in pub.
type loop struct {
	pub          *published      // the merge, the refused pods' statuses, the workers' pods, the sources read
	pleg         *PLEG           // the cache of the last relist: what runs
	asks         *relistRequests // the workers to wake with a relist's result
	events       *events.Store
	log          *slog.Logger
	now          func() time.Time
	rt           Runtime               // removes garbage, in a goroutine of its own
	restrictions restrict.Restrictions // what pods of each source may ask for
	host         Host                  // what the machine can enforce
	deps         workerDeps            // what a new worker gets
	revs         *revisions.Store
	devices      *devices.Manager // nil: no device plugins

	config   *Config
	workers  map[types.UID]*worker
	names    map[string]types.UID           // namespace/name -> the worker's UID holding it
	pending  map[string]*corev1.Pod         // namespace/name -> a pod waiting for the old one to go
	done     chan types.UID                 // workers whose pod is gone
	wg       *sync.WaitGroup                // the workers and the PLEG goroutine
	gcBusy   bool                           // a garbage collection is running
	gcDone   chan struct{}                  // a garbage collection finished
	plegErr  string                         // the last relist error, logged on change only
	resynced time.Time                      // when a relist last woke every worker
	spawn    func(context.Context, *worker) // runs a new worker; tests replace it
	prepulls *prepull.Set                   // images of edited pods pulled before their running instance stops

	// gone are the pods whose worker removed everything of them, with the PLEG's
	// Started generation then: until a relist started after it, the cache may still
	// show their removed containers, and a worker planning from it would count on them.
	gone map[types.UID]uint64
	// removed are the pods a worker removed, with the PLEG's Started generation then,
	// for as long as the runtime may still hold something of them (a removal failed,
	// and housekeeping tries again): a pod wanted again under such a UID is a new
	// instance, whose start is when its worker is made, not the removed pod's that those
	// leftovers record (podStart). An entry goes when such a worker starts, or once a
	// relist started after the removal shows nothing of the UID.
	removed map[types.UID]uint64

	conflicts map[string]bool    // pods refused for their name or UID (Conflict.key), logged once
	remerged  bool               // the sources were merged again once the runtime was listed
	rejected  map[types.UID]bool // pods refused by Admit: restrictions, AppArmor, host ports
	failures  failures           // what each source could not use at its last update

	// merged is the PLEG generation the last merge of the sources began at: at 0 its
	// Config.Running knew nothing of what runs, whatever the cache holds by now.
	merged uint64
}

// newLoop returns the loop of r with what it uses of r's parts; it keeps no pointer
// to r.
func newLoop(r *Runner, wg *sync.WaitGroup) *loop {
	l := &loop{
		pub: r.pub, pleg: r.pleg, asks: r.asks, events: r.events, log: r.log, now: r.now, rt: r.rt,
		restrictions: r.opts.Restrictions, host: r.opts.Host, deps: r.workerDeps(), revs: r.opts.Revisions, devices: r.opts.Devices,
		config: NewConfig(), wg: wg, done: make(chan types.UID),
		workers: map[types.UID]*worker{}, names: map[string]types.UID{}, pending: map[string]*corev1.Pod{},
		gone: map[types.UID]uint64{}, removed: map[types.UID]uint64{}, gcDone: make(chan struct{}, 1),
	}
	l.failures = failures{events: r.events, metrics: r.metrics, last: map[string]map[string]manifests.Failure{}}
	l.spawn = l.runWorker
	l.prepulls = prepull.New(prepuller{l.deps}, wg)
	l.config.Running = l.runningAs
	return l
}

// Run runs the sync loop until ctx is done: it merges source snapshots, relists the
// runtime through the PLEG, and keeps one worker per pod. It never calls the runtime
// itself, so a slow runtime delays pods, never the loop. When ctx is done it returns
// nil after every worker stopped; containers keep running.
func (r *Runner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer r.prober.stopAll() // after the workers: nothing probes a closed runtime
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.runPLEG(ctx)
	}()
	if r.imageGC != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.imageGC.Run(ctx)
		}()
	}
	l := newLoop(r, &wg)
	housekeeping := time.NewTicker(housekeepingPeriod)
	defer housekeeping.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-r.updates:
			l.apply(ctx, u)
		case res := <-r.plegOut:
			l.relisted(ctx, res)
		case <-housekeeping.C:
			l.housekeeping(ctx)
			if healthy, _ := r.Healthy(); healthy && r.opts.Heartbeat != nil {
				r.opts.Heartbeat()
			}
		case uid := <-l.done:
			l.workerGone(ctx, uid)
		case provides := <-r.arrived:
			for _, w := range l.workers {
				w.imagesArrived(provides)
			}
		case <-l.gcDone:
			l.gcBusy = false
		case res := <-l.prepulls.Results():
			l.prepulled(ctx, res)
		case <-r.opts.Devices.Changed():
			l.readmit(ctx) // devices registered or came back: refused pods may have them now
		}
	}
}

// runPLEG relists every RelistPeriod, or sooner when a worker asks, and hands the
// result to the loop.
func (r *Runner) runPLEG(ctx context.Context) {
	ticker := time.NewTicker(r.opts.RelistPeriod)
	defer ticker.Stop()
	var last time.Time
	for first := true; ; first = false {
		if !first { // the first relist is at once: pods wait for it to know what runs
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			case <-r.asks.pending:
			}
		}
		start := time.Now()
		if !last.IsZero() {
			r.metrics.relistInterval.Observe(start.Sub(last).Seconds())
		}
		last = start
		events, err := r.relistRepaired(ctx) // see relistRepaired: repairs come before workers act
		r.metrics.relistDuration.Observe(time.Since(start).Seconds())
		select {
		case r.plegOut <- relistDone{events, err}:
			r.pub.relists.Add(1)
		case <-ctx.Done():
			return
		}
	}
}

// apply records a source's failures, merges its snapshot and starts, updates or stops
// workers to match.
func (l *loop) apply(ctx context.Context, u manifests.Update) {
	l.failures.record(u, l.podName)
	if u.Unchanged {
		return
	}
	l.deps.busy()
	l.progress() // enact below acts on a rollback
	l.merged = l.pleg.Generation()
	desired, conflicts := l.config.Apply(u)
	l.pub.setObjects(u.Source, u.Objects)
	l.enact(ctx, desired, conflicts)
	l.pub.setReady(u.Source) // after enact: UIDHolder sees the source's pods once it is ready
	l.noteKnown()
}

// noteKnown closes UIDsKnown once the holders of UIDs are known. It is called after
// each merge and relist.
func (l *loop) noteKnown() { l.pub.noteKnown(l.pleg.Generation() > 0) }

// enact starts, updates or stops workers to match a merge of the sources, and reports
// its conflicts.
func (l *loop) enact(ctx context.Context, desired map[types.UID]*corev1.Pod, conflicts []Conflict) {
	desired = l.revs.Substitute(desired) // a rolled-back pod runs its last Ready revision (rollback.go)
	rejected := l.admit(desired)
	l.pub.setDesired(desired, l.now())
	reported := map[string]bool{}
	for _, c := range conflicts {
		reported[c.key()] = true
		if !l.conflicts[c.key()] {
			l.log.Warn("pod defined twice; the first definition runs", "pod", c.Pod, "uid", c.Dropped, "ignored", c.Location,
				"source", c.Source, "field", c.Err.Field, "kept", c.Holder, "err", c.Err.ErrorBody())
		}
		l.events.Add(events.Record{Type: events.Warning, Reason: "PodConflict", Message: c.Error(), Source: c.Source})
	}
	l.conflicts = reported
	l.reject(desired, rejected)
	for _, pod := range l.prepulls.Prune(func(pod *corev1.Pod) bool { return desired[pod.UID] != nil && rejected[pod.UID].Pod == nil }) {
		if desired[pod.UID] == nil && l.workers[pod.UID] == nil {
			l.events.Forget(pod.UID) // replaced before it ran: nothing will tell of it again
		}
	}
	for uid, w := range l.workers {
		if pod := desired[uid]; (pod == nil || rejected[uid].Pod != nil || handedOver(w, pod)) && !l.pullFirst(ctx, w, desired, rejected) {
			w.terminate()
		}
	}
	for name, pod := range l.pending {
		// A pod no longer desired as it is (gone, refused, or its UID given to another
		// pod) waits no more; one still wanted is made to wait again below.
		if desired[pod.UID] != pod || rejected[pod.UID].Pod != nil {
			delete(l.pending, name)
		}
	}
	for uid, pod := range desired {
		if rejected[uid].Pod == nil {
			l.want(ctx, uid, pod)
		}
	}
}

// runningAs is the pod the runtime holds containers of under uid (Config.Running), as
// the last relist saw them.
func (l *loop) runningAs(uid types.UID) (RunningPod, bool) {
	pr, gen := l.pleg.Pod(uid)
	if gen == 0 {
		return RunningPod{}, false
	}
	return runningPod(pr)
}

// handedOver reports whether w runs another pod than pod under their UID: one of
// another source or location, which the merge gave the UID to once w's pod was no
// longer wanted. w's pod goes first, with its data; pod then starts afresh.
func handedOver(w *worker, pod *corev1.Pod) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod != nil && !sameDefinition(w.pod, pod)
}

// podName is the namespace/name of a wanted pod, "" for one not wanted.
func (l *loop) podName(uid types.UID) string {
	if pod := l.config.desired[uid]; pod != nil {
		return manifests.Key(pod)
	}
	return ""
}

// want makes sure a worker syncs pod, unless another pod with its name still holds it:
// then pod waits until the old one is gone (one instance per name at a time). Before
// the first relist nothing is known of what runs, so pods wait for it.
func (l *loop) want(ctx context.Context, uid types.UID, pod *corev1.Pod) {
	name := manifests.Key(pod)
	if w, ok := l.workers[uid]; ok {
		if w.killed() {
			l.pending[name] = pod // wanted again while being removed: it comes back after
			return
		}
		w.update(pod)
		l.pub.setWorkerPod(uid, pod)
		return
	}
	// The merge that wants pod must have known what runs too: the PLEG fills its cache
	// before the loop hears of the relist, so a merge that began before may meet a
	// cache that is filled, and would take a UID from a pod it did not see running.
	_, gen := l.pleg.Pod(uid)
	if gen == 0 || l.merged == 0 {
		l.pending[name] = pod
		return
	}
	if started, ok := l.gone[uid]; ok {
		if gen <= started {
			// Removed a moment ago (a directory moved away and back): wait for a
			// relist that no longer shows its containers, or its new containers
			// would take up the old ones' restart counts.
			l.pending[name] = pod
			l.asks.request(uid)
			return
		}
		delete(l.gone, uid)
	}
	if holder, ok := l.names[name]; ok && holder != uid {
		l.pending[name] = pod
		return
	}
	if rp, ok := l.runningAs(uid); ok && !rp.Is(pod) {
		// The runtime holds containers of another pod under this UID, which its
		// source no longer wants (else the merge would have kept the UID for it). They
		// go first, with the pod's data, so that pod never adopts them nor finds
		// their files in its directory.
		l.names[name] = uid
		l.pending[name] = pod
		l.log.Info("removing the previous pod of the UID first", "pod", name, "uid", uid, "previous", rp.Origin())
		l.startWorker(ctx, uid, nil)
		return
	}
	if old, ok := l.runningNamesake(pod); ok {
		// Another instance of this name still runs with no worker: staticpod restarted
		// after its manifest changed. It goes first, once pod's images are present.
		if l.runs(old) && l.pullBefore(ctx, pod, old) {
			l.pending[name] = pod
			return
		}
		l.names[name] = old
		l.pending[name] = pod
		l.log.Info("stopping the previous instance of an edited pod first", "pod", name, "uid", old)
		l.startWorker(ctx, old, nil)
		return
	}
	l.names[name] = uid
	l.startWorker(ctx, uid, pod)
}

func (l *loop) startWorker(ctx context.Context, uid types.UID, pod *corev1.Pod) {
	w := newWorker(l.deps, uid, pod)
	if _, again := l.removed[uid]; again && pod != nil {
		w.startKnown = true // its start is now, whatever the removed pod left records
		delete(l.removed, uid)
	}
	l.workers[uid] = w
	if pod != nil {
		l.prepulls.Drop(manifests.Key(pod)) // its images were pulled first, if they were
	}
	l.pub.setWorkerPod(uid, pod)
	l.spawn(ctx, w)
	w.signal()
}

// runWorker runs w in its own goroutine and tells the loop when its pod is gone.
func (l *loop) runWorker(ctx context.Context, w *worker) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if w.run(ctx) {
			select {
			case l.done <- w.uid:
			case <-ctx.Done():
			}
		}
	}()
}

// resyncPeriod is how often every worker is woken by a relist even if nothing of its
// pod changed: a safety net, as the kubelet's periodic sync is. Between, a relist wakes
// only the workers whose pod it saw change and those that asked for it; back-offs end
// by the workers' own alarms, probe results and spec changes signal them directly.
const resyncPeriod = 10 * time.Second

// relisted wakes the workers a relist concerns: those whose pod changed, those waiting
// for a newer cache, and all of them every resyncPeriod.
func (l *loop) relisted(ctx context.Context, res relistDone) {
	if res.err != nil {
		if msg := res.err.Error(); msg != l.plegErr {
			l.log.Warn("relist failed", "err", res.err)
			l.plegErr = msg
		}
		return
	}
	if l.plegErr != "" {
		l.log.Info("relist works again")
		l.plegErr = ""
	}
	defer l.noteKnown()
	if !l.remerged {
		// The first relist tells what runs: a pod that ran under a name or UID before
		// staticpod restarted keeps it against another manifest that claims it, also
		// one that came alone, before the pod's own source was read. Until now no
		// worker started (want waits for this relist), so nothing changes but what
		// starts: every pod waiting is wanted again from the new merge.
		l.remerged = true
		clear(l.pending)
		l.merged = l.pleg.Generation()
		desired, conflicts := l.config.Merge()
		l.enact(ctx, desired, conflicts)
	}
	if l.progress() { // keeps Ready revisions, rolls back what is not Ready in time
		l.merged = l.pleg.Generation()
		desired, conflicts := l.config.Merge()
		l.enact(ctx, desired, conflicts)
	}
	l.releaseDevices(ctx)
	wake := l.asks.awaited()
	for _, ev := range res.events {
		wake[ev.UID] = true
	}
	all := l.now().Sub(l.resynced) >= resyncPeriod
	if all {
		l.resynced = l.now()
	}
	for uid, w := range l.workers {
		if all || wake[uid] {
			w.signal()
		}
	}
	gen := l.pleg.Generation()
	for uid, started := range l.gone {
		if gen > started {
			delete(l.gone, uid) // the cache is fresh for it
		}
	}
	for uid, started := range l.removed {
		if pr, _ := l.pleg.Pod(uid); gen > started && len(pr.Sandboxes)+len(pr.Containers) == 0 {
			delete(l.removed, uid) // nothing of the removed pod is left to mistake for the next one's
		}
	}
	for name, pod := range maps.Clone(l.pending) { // want may make it wait again
		if _, held := l.names[name]; !held { // waited for the first relist
			delete(l.pending, name)
			l.want(ctx, pod.UID, pod)
		}
	}
}

// workerGone forgets a worker whose pod was removed, and starts a pod that waited for
// its name.
func (l *loop) workerGone(ctx context.Context, uid types.UID) {
	w, ok := l.workers[uid]
	if !ok {
		return
	}
	l.revs.Gone(w.pod, l.config.desired) // only the loop writes w.pod
	delete(l.workers, uid)
	l.pub.dropWorkerPod(uid)
	l.gone[uid] = l.pleg.Started()
	l.removed[uid] = l.gone[uid]
	l.events.Forget(uid)
	defer l.readmit(ctx) // the pod's host ports are free
	for name, holder := range l.names {
		if holder != uid {
			continue
		}
		delete(l.names, name)
		if pod, ok := l.pending[name]; ok {
			delete(l.pending, name)
			l.want(ctx, pod.UID, pod)
		}
	}
}
