package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/prepull"
)

// published is what the sync loop, the pod workers and the PLEG's goroutine publish
// for the others to read: the pods' statuses, the merge of the sources and what each
// source delivered, the pod each worker holds, the relists handed to the loop, and
// whether the holders of UIDs are known. The Runner's API methods, the image collector
// and the workers (their source's objects) read it. The loop decides from state of its
// own (Config, the worker table) and a worker from the PLEG's cache: what is here is
// for the others.
type published struct {
	sources []string      // the sources whose pods make UIDs known (Options.Sources); never changed
	known   chan struct{} // closed by the loop once UIDHolder can tell, see noteKnown
	relists atomic.Uint64 // relists handed to the loop, see Runner.Relists

	mu           sync.RWMutex                 // guards statuses, synced, desired, workerPods, ready, objects, objectsGen, seen and wantedImages
	statuses     map[types.UID]*corev1.Pod    // by the pod's worker, or by the loop for a refused pod
	synced       map[types.UID]bool           // wanted pods with a status of a sync, not only of a pull's progress
	desired      map[types.UID]*corev1.Pod    // the merge of the sources; never changed, only replaced
	workerPods   map[types.UID]*corev1.Pod    // the pod of each worker, by UID: what it runs or removes; nil for an orphan
	ready        map[string]bool              // sources that delivered a snapshot
	objects      map[string]manifests.Objects // each source's ConfigMaps and Secrets
	objectsGen   uint64                       // counts the updates that set objects
	seen         map[types.UID]time.Time      // when each wanted pod was first wanted
	wantedImages []string                     // the images of every wanted pod's containers and image volumes, as the specs spell them
}

func newPublished(sources []string) *published {
	return &published{
		sources:    sources,
		known:      make(chan struct{}),
		statuses:   map[types.UID]*corev1.Pod{},
		synced:     map[types.UID]bool{},
		workerPods: map[types.UID]*corev1.Pod{},
		ready:      map[string]bool{},
		objects:    map[string]manifests.Objects{},
		seen:       map[types.UID]time.Time{},
	}
}

// setObjects records a source's objects, as its update delivered them.
func (p *published) setObjects(source string, objs manifests.Objects) {
	p.mu.Lock()
	p.objects[source] = objs
	p.objectsGen++
	p.mu.Unlock()
}

// setReady records that a source delivered a snapshot.
func (p *published) setReady(source string) {
	p.mu.Lock()
	p.ready[source] = true
	p.mu.Unlock()
}

// setDesired records a merge of the sources: when each pod was first wanted, and the
// images they use; the statuses of the pods no longer wanted go.
func (p *published) setDesired(desired map[types.UID]*corev1.Pod, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.desired = desired
	p.wantedImages = prepull.Images(desired)
	for uid := range desired {
		if _, ok := p.seen[uid]; !ok {
			p.seen[uid] = now
		}
	}
	for uid := range p.seen {
		if _, ok := desired[uid]; !ok {
			delete(p.seen, uid)
			delete(p.statuses, uid)
			delete(p.synced, uid)
		}
	}
}

// setWorkerPod records the pod the worker of uid holds: what it runs or removes, nil
// for an orphan.
func (p *published) setWorkerPod(uid types.UID, pod *corev1.Pod) {
	p.mu.Lock()
	p.workerPods[uid] = pod
	p.mu.Unlock()
}

// dropWorkerPod forgets the pod of a worker that is gone.
func (p *published) dropWorkerPod(uid types.UID) {
	p.mu.Lock()
	delete(p.workerPods, uid)
	p.mu.Unlock()
}

// setStatus publishes pod, with its status, as the status of a wanted pod; that of a
// pod no longer wanted is dropped.
func (p *published) setStatus(uid types.UID, pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if seen, ok := p.seen[uid]; ok {
		pod.Annotations[manifests.AnnotationSeen] = seen.UTC().Format(time.RFC3339Nano)
	}
	if _, wanted := p.seen[uid]; wanted {
		p.statuses[uid] = pod
		p.synced[uid] = true
	}
}

// setUnsynced publishes, as the status of a wanted pod, one that no sync ended with: a
// pull under way, or the pod before its first sync acts. It is show applied to the
// last status, or to base() before there is one; a nil show keeps a status there is.
func (p *published) setUnsynced(uid types.UID, base func() *corev1.Pod, show func(*corev1.Pod) *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen, wanted := p.seen[uid]
	if !wanted {
		return
	}
	pod := p.statuses[uid]
	if pod == nil {
		pod = base()
		pod.Annotations[manifests.AnnotationSeen] = seen.UTC().Format(time.RFC3339Nano)
	}
	if show != nil {
		pod = show(pod)
	}
	p.statuses[uid] = pod
}

// dropStatus forgets the status of uid until one is published again.
func (p *published) dropStatus(uid types.UID) {
	p.mu.Lock()
	delete(p.statuses, uid)
	delete(p.synced, uid)
	p.mu.Unlock()
}

// pods returns every published status, in no order.
func (p *published) pods() []*corev1.Pod {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]*corev1.Pod, 0, len(p.statuses))
	for _, pod := range p.statuses {
		out = append(out, pod)
	}
	return out
}

// settled reports whether every wanted pod has a status of a sync (setStatus).
func (p *published) settled() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for uid := range p.seen {
		if !p.synced[uid] {
			return false
		}
	}
	return true
}

// sourceReady reports whether a source has delivered its first snapshot.
func (p *published) sourceReady(source string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.ready[source]
}

// unread returns the sources of Options.Sources that have not delivered a snapshot.
func (p *published) unread() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []string
	for _, src := range p.sources {
		if !p.ready[src] {
			out = append(out, src)
		}
	}
	return out
}

// holder returns the pod the last merge of the sources gave uid to, else the pod a
// worker still runs or removes under it, else nil.
func (p *published) holder(uid types.UID) *corev1.Pod {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if have := p.desired[uid]; have != nil {
		return have
	}
	return p.workerPods[uid] // no longer wanted, still being removed
}

// objectsOf returns the ConfigMaps and Secrets pod may read: its source's.
func (p *published) objectsOf(pod *corev1.Pod) manifests.Objects {
	objs, _ := p.objectsWithGen(pod)
	return objs
}

// objectsWithGen is objectsOf with the generation of the objects: it changes whenever
// a source sends objects, so that a pod need not look at them again until it does.
func (p *published) objectsWithGen(pod *corev1.Pod) (manifests.Objects, uint64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if objs, ok := p.objects[manifests.SourceOf(pod)]; ok {
		return objs, p.objectsGen
	}
	return manifests.NewObjects(), p.objectsGen
}

// allObjects returns the objects of every source, by source. The objects are shared:
// a source's are replaced by its next update, never changed.
func (p *published) allObjects() map[string]manifests.Objects {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return maps.Clone(p.objects)
}

// images returns the images the wanted pods' specs name and the image IDs their
// statuses report.
func (p *published) images() (wanted, ids []string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	wanted = slices.Clone(p.wantedImages)
	for _, pod := range p.statuses {
		for _, st := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
			ids = append(ids, st.ImageID)
		}
	}
	return wanted, ids
}

// unknown says why the holders of UIDs are not known yet, nil once they are; listed
// is whether the PLEG has listed the runtime.
func (p *published) unknown(listed bool) error {
	switch unread := p.unread(); {
	case len(unread) > 0:
		return fmt.Errorf("sources not all read yet (%s)", strings.Join(unread, ", "))
	case !listed:
		return fmt.Errorf("the runtime not listed yet")
	}
	return nil
}

// noteKnown closes known once the holders of UIDs are known. The loop calls it after
// each merge and relist.
func (p *published) noteKnown(listed bool) {
	select {
	case <-p.known:
	default:
		if p.unknown(listed) == nil {
			close(p.known)
		}
	}
}
