package runner

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/staticpod/staticpod/manifests"
)

// sourceOrder decides conflicts between sources: the earlier source wins, as the file
// source comes first on the kubelet.
var sourceOrder = map[string]int{"file": 0, "http": 1, "api": 2}

// Conflict is a pod refused because another pod already has its namespace/name, or its
// UID (two pods of one UID would share its directory, logs and cgroup).
type Conflict struct {
	Pod      string // namespace/name of the refused pod
	Kept     types.UID
	Dropped  types.UID // the refused pod's; Kept too when the two share a UID
	Source   string    // the source of the refused pod
	Location string    // the refused pod's file, URL or pushed name
	Holder   string    // the pod kept, and where it comes from (manifests.Origin)
	Err      *field.Error
}

func (c Conflict) Error() string { return c.Location + ": " + c.Err.Error() }

// Config merges the snapshots of every source into one set of desired pods, the way the
// kubelet's podStorage does: a source's snapshot replaces its previous one, and a full
// name or a UID wanted by two pods goes to one of them. The pod already wanted keeps it
// (or, once Running says so, the pod whose containers run under the UID); otherwise
// the earlier source, then the first in the source's own order (a directory's files
// in name order). A source counts as ready once it has delivered one snapshot.
//
// A UID whose containers run as another pod (another name, source or location) goes
// to no other pod while the source of the one that runs has not been read: after a
// restart that source may still want it. Once it has been read and does not, the UID
// may go to another pod, which the loop starts only once the old one and its data are
// gone.
type Config struct {
	// Running, when set, tells which pod the runtime holds containers of under uid:
	// after a restart of staticpod, that pod keeps its name and UID against any other,
	// as it would have had staticpod kept running.
	Running func(uid types.UID) (RunningPod, bool)

	sources map[string][]*corev1.Pod
	ready   map[string]bool
	desired map[types.UID]*corev1.Pod
}

// RunningPod is the pod whose containers the runtime holds under a UID, as their labels
// tell it.
type RunningPod struct {
	Namespace, Name string
	Source          string // the source that asked for it: file, http or api
	// Location is its file, URL or pushed name; "" when its containers do not record it
	// (made by an older staticpod, or a location too long for a label): then its name
	// and source alone tell it.
	Location string
}

// runningPod tells which pod the containers of pr belong to; false when the runtime
// holds none under its UID.
func runningPod(pr PodRuntime) (RunningPod, bool) {
	// The containers of one UID are of one pod (see loop.want): each field is taken
	// from the first that records it.
	var rp RunningPod
	found := false
	for _, c := range append(append([]Container{}, pr.Sandboxes...), pr.Containers...) {
		if c.PodName != "" && !found {
			rp.Namespace, rp.Name, found = c.PodNamespace, c.PodName, true
		}
		rp.Source = cmp.Or(rp.Source, c.Source)
		rp.Location = cmp.Or(rp.Location, c.Location)
	}
	return rp, found
}

// Is reports whether pod is the pod that runs: the same namespace/name, from the same
// source and, where its containers recorded it, the same location. Anything else is
// another pod, even under the same UID.
func (rp RunningPod) Is(pod *corev1.Pod) bool {
	return rp.Namespace == pod.Namespace && rp.Name == pod.Name && rp.Source != "" && rp.Source == manifests.SourceOf(pod) &&
		(rp.Location == "" || rp.Location == manifests.LocationOf(pod))
}

// Origin names the pod that runs and where it comes from, for a message.
func (rp RunningPod) Origin() string {
	loc := rp.Location
	if loc == "" {
		loc = "(location not recorded)"
	}
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = rp.Namespace, rp.Name
	pod.Annotations = map[string]string{manifests.AnnotationSource: rp.Source, manifests.AnnotationLocation: loc}
	return manifests.Origin(pod) + " (running)"
}

// NewConfig returns an empty Config.
func NewConfig() *Config {
	return &Config{sources: map[string][]*corev1.Pod{}, ready: map[string]bool{}, desired: map[types.UID]*corev1.Pod{}}
}

// Apply takes a source's snapshot and returns the new desired set and the conflicts in
// it. The desired map is the Config's own; callers must not change it.
func (c *Config) Apply(u manifests.Update) (map[types.UID]*corev1.Pod, []Conflict) {
	c.sources[u.Source] = u.Pods
	c.ready[u.Source] = true
	return c.merge()
}

// Merge merges the last snapshots again, for Running to decide what it could not before
// the runtime was first listed.
func (c *Config) Merge() (map[types.UID]*corev1.Pod, []Conflict) { return c.merge() }

// Ready reports whether source has delivered a snapshot. For "" (containers that do
// not say which source made them) it reports whether any source has.
func (c *Config) Ready(source string) bool {
	if source == "" {
		return len(c.ready) > 0
	}
	return c.ready[source]
}

func (c *Config) merge() (map[types.UID]*corev1.Pod, []Conflict) {
	type candidate struct {
		pod    *corev1.Pod
		source string
		order  int
		index  int
		rank   int // holdRank: higher goes first
	}
	var all []candidate
	for src, pods := range c.sources {
		for i, pod := range pods {
			all = append(all, candidate{pod, src, sourceOrder[src], i, c.holdRank(pod)})
		}
	}
	slices.SortFunc(all, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.rank, a.rank), cmp.Compare(a.order, b.order), cmp.Compare(a.source, b.source), cmp.Compare(a.index, b.index))
	})
	desired := map[types.UID]*corev1.Pod{}
	names := map[string]*corev1.Pod{} // namespace/name -> the pod that has it
	var conflicts []Conflict
	for _, cand := range all {
		pod, key := cand.pod, manifests.Key(cand.pod)
		refuse := func(kept types.UID, holder string, err *field.Error) {
			conflicts = append(conflicts, Conflict{
				Pod: key, Kept: kept, Dropped: pod.UID, Source: manifests.SourceOf(pod), Location: manifests.LocationOf(pod),
				Holder: holder, Err: err,
			})
		}
		if holder := desired[pod.UID]; holder != nil {
			if !sameDefinition(holder, pod) {
				refuse(holder.UID, manifests.Origin(holder), manifests.UIDTaken(pod.UID, manifests.Origin(holder)))
			}
			continue
		}
		if rp, ok := c.running(pod.UID); ok && !rp.Is(pod) && !c.Ready(rp.Source) {
			// Its source may still want the pod that runs: the UID stays with it.
			refuse(pod.UID, rp.Origin(), manifests.UIDTaken(pod.UID, rp.Origin()))
			continue
		}
		if holder := names[key]; holder != nil {
			err := field.Duplicate(field.NewPath("metadata", "name"), pod.Name)
			err.Detail = "pod " + key + " is already defined by " + manifests.Origin(holder) + "; this definition is ignored"
			refuse(holder.UID, manifests.Origin(holder), err)
			continue
		}
		desired[pod.UID] = pod
		names[key] = pod
	}
	slices.SortFunc(conflicts, func(a, b Conflict) int {
		return cmp.Or(cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Location, b.Location))
	})
	c.desired = desired
	return desired, conflicts
}

// holdRank says how firmly pod holds its UID and name: 2 when the runtime runs it under
// that UID (Running: what runs decides, also before the first listing had a say), plus
// 1 when it was wanted under that UID from the same place at the last merge. Another
// pod that merely copied the running one's UID and name is not it (RunningPod.Is).
func (c *Config) holdRank(pod *corev1.Pod) int {
	rank := 0
	if rp, ok := c.running(pod.UID); ok && rp.Is(pod) {
		rank += 2
	}
	if have := c.desired[pod.UID]; have != nil && sameDefinition(have, pod) {
		rank++
	}
	return rank
}

func (c *Config) running(uid types.UID) (RunningPod, bool) {
	if c.Running == nil {
		return RunningPod{}, false
	}
	return c.Running(uid)
}

// sameDefinition reports whether two pods of one UID are one definition: from the same
// source and location (the same file, URL or pushed manifest), perhaps edited.
func sameDefinition(a, b *corev1.Pod) bool {
	return manifests.SourceOf(a) == manifests.SourceOf(b) && manifests.LocationOf(a) == manifests.LocationOf(b)
}

// conflictKey identifies a conflict for reporting it once: the refused pod, where it
// comes from, and what it shares.
func (c Conflict) key() string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s", c.Source, c.Location, c.Dropped, c.Err.Field)
}
