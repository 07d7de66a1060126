// Package prepull pulls the images of a pod's next revision while the revision that
// runs keeps running, so that an update's outage is a stop and a start, not a pull.
// The runner's loop asks it (Need) before it stops the instance an edited pod replaces;
// the pulls run in goroutines of their own and report back on one channel (Results),
// which the loop reads. A pull that fails is tried again after a back-off (10 s
// doubling to 5 min, as the kubelet backs off pulls); a newer revision of the pod
// replaces a pull under way. What a pull is, with its credentials and events, is the
// Puller's: this package decides only what to pull and when. It imports nothing of
// staticpod's (the runner imports it).
package prepull

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Ref is one image a pod needs, and how to make it present.
type Ref struct {
	Image     string
	Policy    corev1.PullPolicy
	Container string // the container that runs it; "" for an image volume
}

// Refs are the images pod needs to start: its init containers' (sidecars included),
// its containers' and its image volumes', in that order, each image once.
func Refs(pod *corev1.Pod) []Ref {
	var out []Ref
	seen := map[string]bool{}
	add := func(r Ref) {
		if r.Image != "" && !seen[r.Image] {
			seen[r.Image] = true
			out = append(out, r)
		}
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		add(Ref{Image: c.Image, Policy: c.ImagePullPolicy, Container: c.Name})
	}
	for _, v := range pod.Spec.Volumes {
		if v.Image != nil {
			add(Ref{Image: v.Image.Reference, Policy: v.Image.PullPolicy})
		}
	}
	return out
}

// Images are the image names the pods need (Refs), sorted, each once.
func Images(pods map[types.UID]*corev1.Pod) []string {
	var out []string
	for _, pod := range pods {
		for _, r := range Refs(pod) {
			out = append(out, r.Image)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Puller makes one image of a pod present as a start of the pod would: with the
// pod's pull policy and pull secrets, telling of it in the pod's events.
type Puller interface {
	Pull(ctx context.Context, pod *corev1.Pod, ref Ref) error
}

// Result is the end of one round of a pod's pulls.
type Result struct {
	Pod   *corev1.Pod
	Err   error         // nil: every image is present
	Image string        // the image that failed
	Retry time.Duration // when Err is set: the back-off before the next round
}

// Back-off of a pull that failed, the kubelet's.
const (
	BackoffInitial = 10 * time.Second
	BackoffMax     = 5 * time.Minute
)

// Set holds at most one pull per pod name. It is owned by one goroutine (the loop),
// which also reads Results; the pulls run in goroutines of their own, which the
// WaitGroup given to New counts.
type Set struct {
	puller  Puller
	wg      *sync.WaitGroup
	results chan Result
	jobs    map[string]*job // by namespace/name
	// After is the clock of the back-offs; tests replace it.
	After func(time.Duration) <-chan time.Time
}

type job struct {
	pod    *corev1.Pod
	cancel context.CancelFunc
	done   bool // every image is present
}

// New returns a Set that pulls with p.
func New(p Puller, wg *sync.WaitGroup) *Set {
	return &Set{puller: p, wg: wg, results: make(chan Result), jobs: map[string]*job{}, After: time.After}
}

// Results are the ends of the pulls' rounds, for the owner to Take.
func (s *Set) Results() <-chan Result { return s.results }

// Need reports whether pod's images are still to be pulled before the instance it
// replaces (of the same name) stops. It starts pulling them unless that is under way
// (started says it did); a pull of another revision of the name is cancelled.
func (s *Set) Need(ctx context.Context, name string, pod *corev1.Pod) (need, started bool) {
	if j := s.jobs[name]; j != nil {
		if j.pod.UID == pod.UID {
			return !j.done, false
		}
		j.cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	s.jobs[name] = &job{pod: pod, cancel: cancel}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.run(ctx, pod)
	}()
	return true, true
}

// Has reports whether name's pull is of the revision uid (under way or done), so that
// Need would start none.
func (s *Set) Has(name string, uid types.UID) bool {
	j := s.jobs[name]
	return j != nil && j.pod.UID == uid
}

// Pulling reports whether the images of a revision of name are being pulled.
func (s *Set) Pulling(name string) bool {
	j := s.jobs[name]
	return j != nil && !j.done
}

// Take records res and reports whether it is of the pull that name holds now (not of
// one a newer revision replaced).
func (s *Set) Take(name string, res Result) bool {
	j := s.jobs[name]
	if j == nil || j.pod.UID != res.Pod.UID {
		return false
	}
	if res.Err == nil {
		j.done = true
	}
	return true
}

// Drop cancels the pull of name and forgets it.
func (s *Set) Drop(name string) {
	if j := s.jobs[name]; j != nil {
		j.cancel()
		delete(s.jobs, name)
	}
}

// Prune drops the pulls of the pods keep says no (a pod no longer wanted), and
// returns those pods.
func (s *Set) Prune(keep func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for name, j := range s.jobs {
		if !keep(j.pod) {
			s.Drop(name)
			out = append(out, j.pod)
		}
	}
	return out
}

// run pulls pod's images in rounds until all are present or ctx is done, reporting
// the end of each round. A round goes on from the image that failed last.
func (s *Set) run(ctx context.Context, pod *corev1.Pod) {
	refs := Refs(pod)
	var delay time.Duration
	for i := 0; ; {
		for ; i < len(refs); i++ {
			if err := s.puller.Pull(ctx, pod, refs[i]); err != nil {
				if ctx.Err() != nil {
					return
				}
				delay = min(max(2*delay, BackoffInitial), BackoffMax)
				if !s.report(ctx, Result{Pod: pod, Err: err, Image: refs[i].Image, Retry: delay}) {
					return
				}
				break
			}
		}
		if i == len(refs) {
			s.report(ctx, Result{Pod: pod})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.After(delay):
		}
	}
}

func (s *Set) report(ctx context.Context, res Result) bool {
	select {
	case s.results <- res:
		return true
	case <-ctx.Done():
		return false
	}
}
