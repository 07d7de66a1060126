package runner

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/backoff"
	"github.com/staticpod/staticpod/runner/devices"
	"github.com/staticpod/staticpod/runner/events"
	"github.com/staticpod/staticpod/runner/imagegc"
	"github.com/staticpod/staticpod/runner/restrict"
	"github.com/staticpod/staticpod/runner/results"
	"github.com/staticpod/staticpod/runner/revisions"
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
	Revisions    *revisions.Store      // keeps Ready revisions and rolls back what is not Ready in time; nil: none
	Registry     prometheus.Registerer // where the runner's metrics go; nil for none
	Restrictions restrict.Restrictions // what pods of each source may ask for; none when zero
	Host         Host                  // what the machine can enforce (ProbeHost); no checks when zero
	Devices      *devices.Manager      // device plugins' devices, given at admission; nil: none (the caller runs it)

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

	// Busy, when set, is called whenever the runner takes on work: a source's update
	// that changes what runs, and each sync in which a worker acts on its pod. The daemon
	// paces its garbage collector by it. It must be cheap and safe from any goroutine.
	Busy func()
}

// Runner keeps the pods its sources want running on its Runtime.
type Runner struct {
	opts     Options
	rt       Runtime
	log      *slog.Logger
	now      func() time.Time
	pleg     *PLEG
	backoffs *backoff.Table
	events   *events.Store
	results  *results.Store
	metrics  *metrics
	prober   *prober
	imageGC  *imagegc.Collector // nil without Options.Images

	pub     *published             // what the loop, the workers and the PLEG's goroutine publish
	asks    *relistRequests        // workers asking for a fresh relist
	updates chan manifests.Update  // from the sources
	plegOut chan relistDone        // relist results, to the loop
	arrived chan func(string) bool // images that came without a pull, see ImagesArrived
	// repairedOnce is set once the runtime repaired before the first relist (see
	// relistRepaired).
	repairedOnce atomic.Bool
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
	if opts.Busy == nil {
		opts.Busy = func() {}
	}
	finished, err := results.New(opts.ResultsDir)
	if err != nil {
		return nil, err
	}
	r := &Runner{
		opts: opts, rt: opts.Runtime, log: opts.Logger, now: opts.Now,
		pleg:     NewPLEG(opts.Runtime, opts.Now),
		backoffs: backoff.New(),
		events:   events.New(opts.Now),
		results:  finished,
		metrics:  newMetrics(opts.Registry),
		pub:      newPublished(opts.Sources),
		asks:     newRelistRequests(),
		updates:  make(chan manifests.Update),
		plegOut:  make(chan relistDone),
		arrived:  make(chan func(string) bool, 1),
	}
	r.prober = newProber(r.rt, r.events, opts.Now)
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
func (r *Runner) Events() *events.Store { return r.events }

// Healthy reports whether the PLEG relisted in the last 3 minutes.
func (r *Runner) Healthy() (bool, time.Time) { return r.pleg.Healthy() }

// Relists is how many relists of the runtime, failed ones included, the sync loop has
// taken since Run started: one at once, then one every relist period or sooner. Each
// wakes every worker, so a few of them prove that the runner had its chance to act; the
// daemon exports the same count as staticpod_pleg_relist_duration_seconds_count.
func (r *Runner) Relists() uint64 { return r.pub.relists.Load() }

// SourceReady reports whether a source has delivered its first snapshot.
func (r *Runner) SourceReady(source string) bool { return r.pub.sourceReady(source) }

// Settled reports whether every wanted pod has a status: its worker has synced it once,
// adopting what runs of it, or it was refused.
func (r *Runner) Settled() bool { return r.pub.settled() }

// Pods returns every wanted pod with its current status, sorted by namespace and name.
func (r *Runner) Pods() []*corev1.Pod {
	out := r.pub.pods()
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
	case <-r.pub.known:
	default:
		return nil, r.pub.unknown(r.pleg.Generation() > 0)
	}
	if have := r.pub.holder(uid); have != nil {
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

// UIDsKnown is closed once the runtime has been listed and every source of
// Options.Sources has delivered its pods and been merged: from then on UIDHolder knows
// the holder of every UID.
func (r *Runner) UIDsKnown() <-chan struct{} { return r.pub.known }

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
		w := newWorker(r.workerDeps(), uid, nil)
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

// Wake asks for a relist now: a runtime event (a task exited) says something changed.
func (r *Runner) Wake() { r.asks.request("") }

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
