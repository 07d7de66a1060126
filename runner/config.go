package runner

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

// sourceOrder decides conflicts between sources for one full pod name: the earlier
// source wins, as the file source comes first on the kubelet.
var sourceOrder = map[string]int{"file": 0, "http": 1, "api": 2}

// Conflict is a pod refused because another pod with the same namespace/name is
// already wanted.
type Conflict struct {
	Pod      string // namespace/name
	Kept     types.UID
	Dropped  types.UID
	Source   string // the source of the dropped pod
	Location string // the dropped pod's file, URL or pushed name
}

func (c Conflict) Error() string {
	return fmt.Sprintf("pod %s from %s is already defined by another manifest; this definition is ignored", c.Pod, c.Location)
}

// Config merges the snapshots of every source into one set of desired pods, the way the
// kubelet's podStorage does: a source's snapshot replaces its previous one, a full name
// wanted twice runs once (the pod already wanted keeps running; otherwise the earlier
// source, then the first in the source's own order), and a source counts as ready once
// it has delivered one snapshot.
type Config struct {
	sources map[string][]*corev1.Pod
	ready   map[string]bool
	desired map[types.UID]*corev1.Pod
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

// Ready reports whether source has delivered a snapshot.
func (c *Config) Ready(source string) bool { return c.ready[source] }

func (c *Config) merge() (map[types.UID]*corev1.Pod, []Conflict) {
	type candidate struct {
		pod   *corev1.Pod
		order int
		index int
		kept  bool
	}
	byName := map[string][]candidate{}
	for src, pods := range c.sources {
		for i, pod := range pods {
			_, kept := c.desired[pod.UID]
			key := manifests.Key(pod)
			byName[key] = append(byName[key], candidate{pod, sourceOrder[src], i, kept})
		}
	}
	desired := map[types.UID]*corev1.Pod{}
	var conflicts []Conflict
	for name, cands := range byName {
		sort.SliceStable(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			if a.kept != b.kept {
				return a.kept
			}
			if a.order != b.order {
				return a.order < b.order
			}
			return a.index < b.index
		})
		win := cands[0].pod
		desired[win.UID] = win
		for _, lost := range cands[1:] {
			if lost.pod.UID == win.UID {
				continue // the same pod from two sources (or twice): nothing to report
			}
			conflicts = append(conflicts, Conflict{
				Pod: name, Kept: win.UID, Dropped: lost.pod.UID,
				Source: sourceOf(lost.pod), Location: locationOf(lost.pod),
			})
		}
	}
	sort.Slice(conflicts, func(i, j int) bool { return conflicts[i].Pod < conflicts[j].Pod })
	c.desired = desired
	return desired, conflicts
}

func sourceOf(pod *corev1.Pod) string   { return pod.Annotations[manifests.AnnotationSource] }
func locationOf(pod *corev1.Pod) string { return pod.Annotations[manifests.AnnotationLocation] }
