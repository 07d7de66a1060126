package runner

import "k8s.io/apimachinery/pkg/types"

// Garbage returns the exited containers and sandboxes that can be removed: for each
// container of each pod, every exited attempt but the latest one and the latest one
// that exited (kept, as on the kubelet, for `logs --previous` and lastState), and every
// exited sandbox but the pod's latest. Pods whose UID is not in keep (pods no longer
// wanted) lose every exited container and sandbox. Running containers are never
// garbage: stopping them is the sync loop's decision, not the collector's.
//
// A container created but never started (a staticpod stopped between creating and
// starting it) is garbage once a later attempt exists, or its pod is not wanted: it
// will never start. Stopped, it has no exit worth keeping either.
func Garbage(all []Container, keep map[types.UID]bool) []Container {
	type key struct {
		uid  types.UID
		kind Kind
		name string
	}
	latest, latestExited := map[key]int{}, map[key]int{}
	for _, c := range all {
		k := key{c.PodUID, c.Kind, c.Name}
		if a, ok := latest[k]; !ok || c.Attempt > a {
			latest[k] = c.Attempt
		}
		if a, ok := latestExited[k]; c.State == StateExited && !c.StartedAt.IsZero() && (!ok || c.Attempt > a) {
			latestExited[k] = c.Attempt
		}
	}
	var out []Container
	for _, c := range all {
		k := key{c.PodUID, c.Kind, c.Name}
		if c.State == StateCreated && (!keep[c.PodUID] || c.Attempt < latest[k]) {
			out = append(out, c)
		}
		if c.State != StateExited {
			continue
		}
		a, ok := latestExited[k]
		lastExit := ok && c.Kind == KindContainer && c.Attempt == a // sandboxes have no logs
		if !keep[c.PodUID] || c.Attempt < latest[k] && !lastExit {
			out = append(out, c)
		}
	}
	return out
}
