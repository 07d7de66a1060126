package runner

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/staticpod/staticpod/manifests"
)

// Periods of the sync loop, as on the kubelet.
const (
	DefaultRelistPeriod = time.Second
	syncPeriod          = time.Second     // wake every worker: back-offs expire, probes report
	housekeepingPeriod  = 2 * time.Second // orphans and garbage
)

// Options configure a Runner.
type Options struct {
	Runtime      Runtime
	Logger       *slog.Logger
	Now          func() time.Time      // the clock; time.Now when nil
	RelistPeriod time.Duration         // DefaultRelistPeriod when 0
	HostIP       string                // reported as status.hostIP
	ResultsDir   string                // where finished pods are remembered; "" = memory only
	Registry     prometheus.Registerer // where the runner's metrics go; nil for none
	Restrictions Restrictions          // what pods of each source may ask for; none when zero

	// Images, when set, has unused images removed per ImageGC once every source in
	// Sources has delivered its pods (see imageCollector), and Runner.Images list them.
	Images  ImageStore
	ImageGC ImageGCPolicy
	Sources []string

	// Heartbeat, when set, is called by the sync loop every housekeeping period while
	// the loop turns and its relists succeed (the PLEG is healthy): a loop that hangs
	// or a runtime that stops answering stops the calls. The daemon pings systemd's
	// watchdog from it. It must return quickly.
	Heartbeat func()
}

// Runner keeps the pods its sources want running on its Runtime.
type Runner struct {
	opts     Options
	rt       Runtime
	log      *slog.Logger
	now      func() time.Time
	pleg     *PLEG
	backoffs *Backoffs
	events   *Events
	results  *Results
	metrics  *metrics
	prober   *prober
	imageGC  *imageCollector // nil without Options.Images

	updates  chan manifests.Update  // from the sources
	relist   chan types.UID         // workers asking for a fresh relist
	awaitMu  sync.Mutex             // guards awaiting
	awaiting map[types.UID]bool     // the workers to wake with the next relist's result
	plegOut  chan relistDone        // relist results, to the loop
	done     chan types.UID         // workers whose pod is gone
	arrived  chan func(string) bool // images that came without a pull, see ImagesArrived
	relists  atomic.Uint64          // relists handed to the loop, see Relists
	// repairedOnce is set once the runtime repaired before the first relist (see
	// relistRepaired).
	repairedOnce atomic.Bool
	known        chan struct{} // closed by the loop once UIDHolder can tell, see UIDsKnown

	mu           sync.RWMutex // guards statuses, ready, objects, objectsGen, seen, desired, workerPods and wantedImages
	statuses     map[types.UID]*corev1.Pod
	desired      map[types.UID]*corev1.Pod    // the merge of the sources; never changed, only replaced
	workerPods   map[types.UID]*corev1.Pod    // the pod of each worker, by UID: what it runs or removes; nil for an orphan
	ready        map[string]bool              // sources that delivered a snapshot
	objects      map[string]manifests.Objects // each source's ConfigMaps and Secrets
	objectsGen   uint64                       // counts the updates that set objects
	seen         map[types.UID]time.Time
	wantedImages []string // the images of every wanted pod's containers, as the specs spell them
}

type relistDone struct {
	events []Event
	err    error
}

// New returns a Runner; Run starts it.
func New(opts Options) (*Runner, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RelistPeriod == 0 {
		opts.RelistPeriod = DefaultRelistPeriod
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	results, err := NewResults(opts.ResultsDir)
	if err != nil {
		return nil, err
	}
	r := &Runner{
		opts: opts, rt: opts.Runtime, log: opts.Logger, now: opts.Now,
		pleg:       NewPLEG(opts.Runtime, opts.Now),
		backoffs:   NewBackoffs(),
		events:     NewEvents(opts.Now),
		results:    results,
		metrics:    newMetrics(opts.Registry),
		updates:    make(chan manifests.Update),
		relist:     make(chan types.UID, 1),
		awaiting:   map[types.UID]bool{},
		plegOut:    make(chan relistDone),
		done:       make(chan types.UID),
		arrived:    make(chan func(string) bool, 1),
		known:      make(chan struct{}),
		statuses:   map[types.UID]*corev1.Pod{},
		workerPods: map[types.UID]*corev1.Pod{},
		ready:      map[string]bool{},
		objects:    map[string]manifests.Objects{},
		seen:       map[types.UID]time.Time{},
	}
	r.prober = newProber(r)
	if opts.Images != nil {
		if err := opts.ImageGC.Validate(); err != nil {
			return nil, err
		}
		r.imageGC = newImageCollector(r, opts.Images, opts.ImageGC)
	}
	return r, nil
}

// Update hands a source's update to the sync loop. It blocks until the loop takes it or
// ctx is done.
func (r *Runner) Update(ctx context.Context, u manifests.Update) error {
	select {
	case r.updates <- u:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ImagesArrived tells the runner that images came in without a pull (an archive was
// imported): pods whose pulls back off for an image that provides reports present try
// again at once. It never blocks, also before Run starts (archives are imported while
// staticpod starts): what the loop has not taken yet is folded into one.
func (r *Runner) ImagesArrived(provides func(image string) bool) {
	for {
		select {
		case r.arrived <- provides:
			return
		case pending := <-r.arrived:
			next := provides
			provides = func(image string) bool { return pending(image) || next(image) }
		}
	}
}

// Images returns the runtime's images, with whether a known pod uses them and when one
// last did. Without Options.Images it returns ErrNotFound.
func (r *Runner) Images(ctx context.Context) ([]ImageUse, error) {
	if r.imageGC == nil {
		return nil, fmt.Errorf("images: %w", ErrNotFound)
	}
	return r.imageGC.Images(ctx)
}

// Events is the runner's event store.
func (r *Runner) Events() *Events { return r.events }

// Healthy reports whether the PLEG relisted in the last 3 minutes.
func (r *Runner) Healthy() (bool, time.Time) { return r.pleg.Healthy() }

// Relists is how many relists of the runtime, failed ones included, the sync loop has
// taken since Run started: one at once, then one every relist period or sooner. Each
// wakes every worker, so a few of them prove that the runner had its chance to act; the
// daemon exports the same count as staticpod_pleg_relist_duration_seconds_count.
func (r *Runner) Relists() uint64 { return r.relists.Load() }

// SourceReady reports whether a source has delivered its first snapshot.
func (r *Runner) SourceReady(source string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.ready[source]
}

// Settled reports whether every wanted pod has a status: its worker has synced it once,
// adopting what runs of it, or it was refused.
func (r *Runner) Settled() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for uid := range r.seen {
		if _, ok := r.statuses[uid]; !ok {
			return false
		}
	}
	return true
}

// Pods returns every wanted pod with its current status, sorted by namespace and name.
func (r *Runner) Pods() []*corev1.Pod {
	r.mu.RLock()
	out := make([]*corev1.Pod, 0, len(r.statuses))
	for _, p := range r.statuses {
		out = append(out, p)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// UIDHolder returns the pod that has uid (its metadata only), or nil: the pod the last
// merge of the sources gave it to, else the pod a worker still runs or removes under
// it, else the pod whose containers the runtime holds under it, named from their labels. It is for a source to refuse, as it is given, a pod
// that would take another's UID (Config gives it to one pod in any case). Until
// UIDsKnown is closed a UID's holder may not be known yet: it returns an error saying
// why.
func (r *Runner) UIDHolder(uid types.UID) (*corev1.Pod, error) {
	select {
	case <-r.known:
	default:
		return nil, r.unknown()
	}
	r.mu.RLock()
	have := r.desired[uid]
	if have == nil {
		have = r.workerPods[uid] // no longer wanted, still being removed
	}
	r.mu.RUnlock()
	if have != nil {
		return &corev1.Pod{ObjectMeta: *have.ObjectMeta.DeepCopy()}, nil
	}
	// An orphan being removed, or containers not yet adopted: what the last relist saw.
	// A container made since is of a pod with a worker.
	pr, _ := r.pleg.Pod(uid)
	rp, ok := runningPod(pr)
	if !ok {
		return nil, nil
	}
	pod := &corev1.Pod{}
	pod.UID, pod.Namespace, pod.Name = uid, rp.Namespace, rp.Name
	pod.Annotations = map[string]string{manifests.AnnotationSource: rp.Source, manifests.AnnotationLocation: rp.Location}
	return pod, nil
}

func (r *Runner) setWorkerPod(uid types.UID, pod *corev1.Pod) {
	r.mu.Lock()
	r.workerPods[uid] = pod
	r.mu.Unlock()
}

// UIDsKnown is closed once the runtime has been listed and every source of
// Options.Sources has delivered its pods and been merged: from then on UIDHolder knows
// the holder of every UID.
func (r *Runner) UIDsKnown() <-chan struct{} { return r.known }

// unknown says why the holders of UIDs are not known yet, nil once they are.
func (r *Runner) unknown() error {
	r.mu.RLock()
	var unread []string
	for _, src := range r.opts.Sources {
		if !r.ready[src] {
			unread = append(unread, src)
		}
	}
	r.mu.RUnlock()
	switch {
	case len(unread) > 0:
		return fmt.Errorf("sources not all read yet (%s)", strings.Join(unread, ", "))
	case r.pleg.Generation() == 0:
		return fmt.Errorf("the runtime not listed yet")
	}
	return nil
}

// noteKnown closes UIDsKnown once the holders of UIDs are known. The loop calls it
// after each merge and relist.
func (r *Runner) noteKnown() {
	select {
	case <-r.known:
	default:
		if r.unknown() == nil {
			close(r.known)
		}
	}
}

func (r *Runner) publish(uid types.UID, pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seen, ok := r.seen[uid]; ok {
		pod.Annotations[manifests.AnnotationSeen] = seen.UTC().Format(time.RFC3339Nano)
	}
	if _, wanted := r.seen[uid]; wanted {
		r.statuses[uid] = pod
	}
}

// requestRelist asks the PLEG for a relist as soon as possible, and for the worker of
// uid (if any) to be woken by its result.
func (r *Runner) requestRelist(uid types.UID) {
	if uid != "" {
		r.awaitMu.Lock()
		r.awaiting[uid] = true
		r.awaitMu.Unlock()
	}
	select {
	case r.relist <- "":
	default: // one is pending already
	}
}

// StopAll stops every pod the runtime holds for staticpod, as a kill of each would,
// with each pod's grace period where its spec is known. It is for --stop-pods-on-exit,
// after Run has returned.
func (r *Runner) StopAll(ctx context.Context) error {
	if _, err := r.pleg.Relist(ctx); err != nil {
		return err
	}
	r.stopPods(ctx, func(*corev1.Pod) bool { return true }, 0)
	_, err := r.relistRepaired(ctx) // the repair reaps the exits: no shim stays behind for a stopped task
	return err
}

// stopPods stops, at once, the pods the last relist found whose spec (nil when unknown)
// pick picks, each with its grace period capped at maxGrace when that is above 0.
func (r *Runner) stopPods(ctx context.Context, pick func(*corev1.Pod) bool, maxGrace time.Duration) {
	specs := map[types.UID]*corev1.Pod{}
	for _, p := range r.Pods() {
		specs[p.UID] = p
	}
	var wg sync.WaitGroup
	for uid, pr := range r.pleg.Pods() {
		if !pick(specs[uid]) {
			continue
		}
		w := newWorker(r, uid, nil)
		w.spec = specs[uid]
		w.sandbox = runningSandbox(pr) // hooks reach the pod in its network
		w.maxGrace = maxGrace
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.killPod(ctx, pr)
		}()
	}
	wg.Wait()
}

// awaited takes the set of workers that asked for a relist since it was last taken.
func (r *Runner) awaited() map[types.UID]bool {
	r.awaitMu.Lock()
	defer r.awaitMu.Unlock()
	out := r.awaiting
	r.awaiting = map[types.UID]bool{}
	return out
}

// Wake asks for a relist now: a runtime event (a task exited) says something changed.
func (r *Runner) Wake() { r.requestRelist("") }

// LogPath is the CRI log file of the container with the runtime ID id, as the runtime
// reported it in the last relist.
func (r *Runner) LogPath(id string) (string, bool) {
	for _, pr := range r.pleg.Pods() {
		for _, c := range pr.Containers {
			if c.ID == id && c.LogPath != "" {
				return c.LogPath, true
			}
		}
	}
	return "", false
}
